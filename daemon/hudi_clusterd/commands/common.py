"""Helpers shared by the command modules: loading a policy file, printing warnings, opening the table."""

from __future__ import annotations

import sys
from pathlib import Path

from hudi_clusterd.domain.keys import KeyReader
from hudi_clusterd.domain.policy import ClusteringPolicy, parse_policy
from hudi_clusterd.errors import ConfigError
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.lock import lock_provider_from_properties
from hudi_clusterd.settings_keys import DAEMON_KEYS
from hudi_clusterd.storage import open_storage, table_storage_spec
from hudi_clusterd.table.hoodie_table import HoodieTable

MERGE_SEMANTICS = DAEMON_KEYS["clusterd.merge.semantics"]


def load_properties(path: str | None) -> dict[str, str]:
    """The keys of a ``.properties`` file; none when ``path`` is None."""
    if path is None:
        return {}
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the properties file ({e.strerror or e})") from e
    return parse_properties(text, str(p))


def load_policy(path: str | None) -> ClusteringPolicy:
    """The clustering policy of a ``.properties`` file (Hudi's keys), or Hudi's defaults when ``path`` is None.

    Warnings (unknown or deprecated keys) go to stderr, one per line."""
    policy, warnings = parse_policy(load_properties(path), source="(defaults)" if path is None else str(Path(path)))
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return policy


def open_table(base_path: str, props_path: str | None) -> HoodieTable:
    """The table, locked the way its writers lock it (the ``hoodie.write.lock.*`` keys of the properties file)
    and merged as ``clusterd.merge.semantics`` there says (a version-6 merge-on-read table)."""
    props = load_properties(props_path)
    storage = open_storage(table_storage_spec(base_path, props))
    lock = lock_provider_from_properties(props, storage)
    reader = KeyReader(props)
    semantics = reader.get(MERGE_SEMANTICS)
    if reader.problems:
        raise ConfigError(f"invalid settings in {props_path}", reader.problems)
    return HoodieTable.open(base_path, storage, lock_provider=lock, merge_release=semantics)
