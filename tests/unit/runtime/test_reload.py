"""SettingsHolder: parse fully, then swap one reference; failures keep the old settings and are counted."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from hudi_clusterd.errors import ConfigError, TimelineError
from hudi_clusterd.runtime.metrics import Metrics
from hudi_clusterd.runtime.reload import ReloadOutcome, SettingsHolder


@dataclass(frozen=True, slots=True)
class FakeSettings:
    tables: tuple[str, ...]
    grace_seconds: int = 60


def outcomes_recorder() -> tuple[list[ReloadOutcome], SettingsHolder[FakeSettings]]:
    seen: list[ReloadOutcome] = []
    return seen, SettingsHolder(FakeSettings(("t1",)), on_result=seen.append)


def test_settings_holder_valid_reload_swaps_and_reports_success() -> None:
    # Given a holder with the start-up settings
    seen, holder = outcomes_recorder()
    new = FakeSettings(("t1", "t2"))

    # When a reload loads valid settings
    ok = holder.try_reload(lambda: new)

    # Then the new object is current, and success was reported
    assert ok is True
    assert holder.current is new
    assert seen == ["success"]


def test_settings_holder_invalid_config_keeps_old_and_logs_every_problem() -> None:
    # Given a holder and a loader rejecting the file with two problems
    seen, holder = outcomes_recorder()
    old = holder.current

    def loader() -> FakeSettings:
        raise ConfigError(
            "/etc/clusterd/clusterd.toml: invalid",
            ["hoodie.clustering.plan.strategy.target.file.max.bytes: must be > 0, got -1", "tables: empty"],
        )

    # When the reload is attempted
    with capture_logs() as logs:
        ok = holder.try_reload(loader)

    # Then the old settings stay, failure is reported, and the log names the file and each problem
    assert ok is False
    assert holder.current is old
    assert seen == ["failure"]
    (entry,) = [e for e in logs if e["log_level"] == "error"]
    assert "/etc/clusterd/clusterd.toml" in entry["error"]
    assert entry["problems"] == [
        "hoodie.clustering.plan.strategy.target.file.max.bytes: must be > 0, got -1",
        "tables: empty",
    ]


def test_settings_holder_other_clusterd_error_keeps_old() -> None:
    seen, holder = outcomes_recorder()
    old = holder.current

    def loader() -> FakeSettings:
        raise TimelineError("cannot read table t9")

    assert holder.try_reload(loader) is False
    assert holder.current is old
    assert seen == ["failure"]


def test_settings_holder_loader_bug_keeps_old_and_logs_traceback() -> None:
    # Given a loader with a bug
    seen, holder = outcomes_recorder()
    old = holder.current

    def loader() -> FakeSettings:
        raise KeyError("oops")

    # When reloading
    with capture_logs() as logs:
        ok = holder.try_reload(loader)

    # Then the daemon keeps running on the old settings and the traceback is logged
    assert ok is False
    assert holder.current is old
    assert seen == ["failure"]
    assert any(e.get("exc_info") for e in logs)


def test_settings_holder_unchanged_reload_still_succeeds_and_logs_changed_false() -> None:
    seen, holder = outcomes_recorder()
    with capture_logs() as logs:
        assert holder.try_reload(lambda: FakeSettings(("t1",)))
    assert seen == ["success"]
    assert [e["changed"] for e in logs if e["event"] == "config reloaded"] == [False]


def test_settings_holder_failing_result_hook_does_not_undo_the_reload() -> None:
    def broken_hook(outcome: ReloadOutcome) -> None:
        raise RuntimeError("metrics down")

    holder = SettingsHolder(FakeSettings(("t1",)), on_result=broken_hook)
    new = FakeSettings(("t2",))
    assert holder.try_reload(lambda: new) is True
    assert holder.current is new


@pytest.mark.parametrize(("fail", "success", "failure"), [(False, 1, 0), (True, 0, 1)])
def test_settings_holder_on_result_feeds_reload_metrics(fail: bool, success: int, failure: int) -> None:
    # Given a holder wired to the metrics the daemon exports
    metrics = Metrics()
    holder = SettingsHolder(FakeSettings(("t1",)), on_result=metrics.config_reload)

    def loader() -> FakeSettings:
        if fail:
            raise ConfigError("clusterd.toml: invalid")
        return FakeSettings(("t2",))

    # When one reload runs
    holder.try_reload(loader)

    # Then the counter with the matching outcome moved
    sample = metrics.registry.get_sample_value
    assert sample("hudi_clusterd_config_reloads_total", {"outcome": "success"}) == success
    assert sample("hudi_clusterd_config_reloads_total", {"outcome": "failure"}) == failure
