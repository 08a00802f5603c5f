"""Plain helpers shared by tests (import as ``from tests.support import ...``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = (REPO_ROOT / ".." / "shared").resolve()
# the golden v6 copy-on-write tables of ../shared/reference/hudi-tables/cow (unzipped by the golden_tables fixture)
V6_TABLES = [
    "v6_complexkeygen_hivestyle",
    "v6_empty",
    "v6_nonpartitioned",
    "v6_simplekeygen_hivestyle_no_metafields",
    "v6_simplekeygen_nonhivestyle",
    "v6_simplekeygen_nonhivestyle_overwritetable",
    "v6_timebasedkeygen_nonhivestyle",
]
# the golden copy-on-write tables of table versions 8 and 9 (timeline layout 2), written by Apache Hudi 1.x
V8_V9_TABLES = [
    "v8_simplekeygen_nonhivestyle_overwritetable",
    "v9_txns_complex_meta",
    "v9_txns_complex_nometa",
    "v9_txns_nonpart_meta",
    "v9_txns_nonpart_nometa",
    "v9_txns_simple_meta",
    "v9_txns_simple_nometa",
    "v9_txns_simple_overwrite",
]


# hypothesis settings of the fuzz tests of hostile input
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def require_shared(*parts: str) -> Path:
    """Return a path under ../shared, or skip the test with a clear reason when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared not found beside the repository ({path}); this test needs the shared references")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
