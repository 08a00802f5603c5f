"""No code from configuration: a strategy class named in the policy or the settings is refused, never imported."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hudi_clusterd.domain.policy import parse_policy
from hudi_clusterd.errors import ConfigError
from hudi_clusterd.settings import settings_from_properties


@pytest.fixture
def trap_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module that, if ever imported, leaves a file behind."""
    sentinel = tmp_path / "imported"
    (tmp_path / "clusterd_trap.py").write_text(f"open({str(sentinel)!r}, 'w').close()\nclass Evil: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "clusterd_trap", raising=False)
    return sentinel


@pytest.mark.parametrize("key", ["hoodie.clustering.execution.strategy.class", "hoodie.clustering.plan.strategy.class"])
def test_policy_unknown_strategy_class_is_config_error_without_import(trap_module: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_policy({key: "clusterd_trap.Evil"}, source="test")
    with pytest.raises(ConfigError, match="clusterd_trap"):
        settings_from_properties({"clusterd.tables": "t", "clusterd.table.t.base.path": "/x/t",
                                  f"clusterd.table.t.{key}": "clusterd_trap.Evil"})
    assert not trap_module.exists() and "clusterd_trap" not in sys.modules
