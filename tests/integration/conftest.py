"""Shared Spark fixture: one local[2] SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from hudi_clusterd.engine.session import get_or_create_session

    session = get_or_create_session(
        "local[2]",
        app_name="hudi-clusterd-tests",
        conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
