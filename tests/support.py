"""Plain helpers shared by tests (import as ``from tests.support import ...``)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = (REPO_ROOT / ".." / "shared").resolve()


def require_shared(*parts: str) -> Path:
    """Return a path under ../shared, or skip the test with a clear reason when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared not found beside the repository ({path}); this test needs the shared references")
    return path
