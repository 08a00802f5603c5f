"""One Apache Hudi worker per setup (Hudi 0.15 and 1.2 on Spark 3.5), started once per session and shared.

The fixtures are parametrised over :data:`tests.harness.hudi_versions.SETUPS`; pytest groups the tests by setup,
so at most one worker (one JVM) runs at a time. A setup whose cache is missing skips its tests, or fails them
under ``CLUSTERD_REQUIRE_HUDI=1`` (see ``tests/harness/apache_hudi.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.apache_hudi import HudiWorker, started_worker
from tests.harness.hudi_versions import SETUPS, HudiSetup


@pytest.fixture(scope="session", params=SETUPS, ids=[s.name for s in SETUPS])
def hudi_setup(request: pytest.FixtureRequest) -> HudiSetup:
    """The Hudi setup under test (parametrises every test that uses it)."""
    setup: HudiSetup = request.param
    return setup


@pytest.fixture(scope="session")
def apache_hudi(hudi_setup: HudiSetup, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HudiWorker]:
    """A running Hudi worker for ``hudi_setup``; stopped when the session (or the setup's tests) end."""
    yield from started_worker(hudi_setup, tmp_path_factory.mktemp(f"{hudi_setup.name}-worker"))
