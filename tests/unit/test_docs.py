"""The configuration reference (docs/configuration.md) lists every key the daemon reads, with its default."""

from __future__ import annotations

import html

import pytest

from hudi_clusterd.domain.policy_keys import policy_reference
from hudi_clusterd.lock import lock_reference
from hudi_clusterd.settings import settings_reference
from tests.support import REPO_ROOT

CONFIGURATION = REPO_ROOT / "docs" / "configuration.md"
REFERENCE = CONFIGURATION.read_text(encoding="utf-8")


@pytest.mark.parametrize(("key", "default", "meaning"), [*policy_reference(), *lock_reference(), *settings_reference()],
                         ids=lambda v: str(v)[:60])
def test_configuration_reference_lists_every_key_with_its_default(key: str, default: str | None,
                                                                  meaning: str) -> None:
    shown = "(none)" if default is None else f"`{default}`"
    # the meaning is Markdown text outside a code span: "<name>" is escaped so that it renders rather than
    # passing as an HTML tag
    row = f"| `{key}` | {shown} | {html.escape(meaning, quote=False)} |"
    assert row in REFERENCE, f"docs/configuration.md lacks the row of {key}"
