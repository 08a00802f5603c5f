"""Helpers shared by the command modules: loading a policy file, printing warnings, opening the table."""

from __future__ import annotations

import sys
from pathlib import Path

from hudi_clusterd.domain.policy import ClusteringPolicy, parse_policy
from hudi_clusterd.errors import ConfigError
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.lock import LockOptions
from hudi_clusterd.table.hoodie_table import HoodieTable


def load_policy(path: str | None) -> ClusteringPolicy:
    """The clustering policy of a ``.properties`` file (Hudi's keys), or Hudi's defaults when ``path`` is None.

    Warnings (unknown or deprecated keys) go to stderr, one per line."""
    props: dict[str, str] = {}
    source = "(defaults)"
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"{path}: cannot read the properties file ({e.strerror or e})") from e
        source = str(p)
        props = parse_properties(text, source)
    policy, warnings = parse_policy(props, source=source)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return policy


def open_table(base_path: str, policy: ClusteringPolicy) -> HoodieTable:
    """The table, locked the way its writers lock it (``hoodie.write.lock.filesystem.*`` of the policy)."""
    return HoodieTable.open(base_path, lock_options=LockOptions.for_policy(policy))
