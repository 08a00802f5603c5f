"""The README's configuration reference lists every key the daemon reads, with its default."""

from __future__ import annotations

import pytest

from hudi_clusterd.domain.policy_keys import policy_reference
from hudi_clusterd.settings import settings_reference
from tests.support import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("key", "default", "meaning"), [*policy_reference(), *settings_reference()],
                         ids=lambda v: str(v)[:60])
def test_readme_lists_every_key_with_its_default(key: str, default: str | None, meaning: str) -> None:
    shown = "(none)" if default is None else f"`{default}`"
    assert f"| `{key}` | {shown} | {meaning} |" in README, f"README.md lacks the row of {key}"
