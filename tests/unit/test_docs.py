"""The configuration reference (docs/configuration.md) is checked against the key tables: every key the daemon reads
is listed with its default and meaning, in its section, and every key listed is one the daemon reads."""

from __future__ import annotations

import html
import re

import pytest

from hudi_clusterd.domain.keys import Key, reference_rows
from hudi_clusterd.domain.policy_keys import KEY_SPECS, policy_reference
from hudi_clusterd.lock import lock_reference
from hudi_clusterd.lock.registry import LOCK_KEYS
from hudi_clusterd.settings import settings_reference
from hudi_clusterd.settings_keys import DAEMON_KEYS
from hudi_clusterd.storage.object_config import RETRY_OPTION_KEYS
from hudi_clusterd.storage.s3_settings import HUDI_AWS_KEYS, S3_OPTION_KEYS
from tests.support import REPO_ROOT

CONFIGURATION = REPO_ROOT / "docs" / "configuration.md"
REFERENCE = CONFIGURATION.read_text(encoding="utf-8")
LOCK_PAGE = (REPO_ROOT / "docs" / "lock.md").read_text(encoding="utf-8")
SECTIONS: dict[str, list[tuple[str, str | None, str]]] = {
    "## Clustering policy": policy_reference(),
    "## The table lock": lock_reference(),
    "## Object stores: the client's settings": reference_rows((*S3_OPTION_KEYS, *RETRY_OPTION_KEYS)),
    "## Daemon settings": settings_reference(),
}
TABLES: dict[str, tuple[Key[object], ...]] = {
    "policy": tuple(KEY_SPECS.values()), "lock": LOCK_KEYS, "object stores": (*S3_OPTION_KEYS, *RETRY_OPTION_KEYS),
    "daemon": tuple(DAEMON_KEYS.values()),
}


def _section(heading: str) -> str:
    start = REFERENCE.index(heading)
    end = REFERENCE.find("\n## ", start + 1)
    return REFERENCE[start:] if end < 0 else REFERENCE[start:end]


def _row(key: str, default: str | None, meaning: str) -> str:
    shown = "(none)" if default is None else f"`{default}`"
    # the meaning is Markdown text outside a code span: "<name>" is escaped so that it renders rather than
    # passing as an HTML tag
    return f"| `{key}` | {shown} | {html.escape(meaning, quote=False)} |"


@pytest.mark.parametrize(("heading", "key", "default", "meaning"),
                         [(h, *row) for h, rows in SECTIONS.items() for row in rows], ids=lambda v: str(v)[:60])
def test_every_key_of_the_tables_is_documented_with_its_default_in_its_section(heading: str, key: str,
                                                                               default: str | None,
                                                                               meaning: str) -> None:
    assert _row(key, default, meaning) in _section(heading).splitlines(), \
        f"docs/configuration.md ({heading}) lacks the row of {key}"


@pytest.mark.parametrize("heading", SECTIONS)
def test_every_documented_key_is_a_key_of_the_tables_once(heading: str) -> None:
    documented = re.findall(r"^\| `([^`]+)` \|", _section(heading), re.MULTILINE)
    assert documented == [key for key, _, _ in SECTIONS[heading]]


def test_the_keys_the_lock_page_names_are_lock_keys_or_their_aliases() -> None:
    named = set(re.findall(r"hoodie\.(?:write\.lock|aws)\.[a-z_.]*[a-z_]", LOCK_PAGE))
    known = {name for key in LOCK_KEYS for name in key.names}
    assert named and named <= known, sorted(named - known)


@pytest.mark.parametrize("table", TABLES)
def test_each_table_names_a_key_once_and_every_parser_takes_its_default(table: str) -> None:
    keys = TABLES[table]
    names = [name for key in keys for name in key.names]
    assert len(names) == len(set(names))
    for key in keys:
        key.parse(key.default or "")  # the value of an unset key, and the fallback after a bad one


def test_the_writers_aws_keys_are_the_s3_clients_credentials() -> None:
    options = {key.name for key in S3_OPTION_KEYS}
    assert [key.field for key in HUDI_AWS_KEYS] == ["access_key_id", "secret_access_key", "session_token"]
    assert {key.field for key in HUDI_AWS_KEYS} <= options
    assert set(HUDI_AWS_KEYS) <= set(LOCK_KEYS)
