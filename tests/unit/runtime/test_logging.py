"""configure_logging: JSON lines off a TTY, console on a TTY, bound context, stdlib routing, idempotence."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import structlog
from structlog.contextvars import bound_contextvars

from hudi_clusterd.errors import ConfigError
from hudi_clusterd.runtime.logging import NOISY_LOGGERS, configure_logging, reset_logging


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    reset_logging()
    root.setLevel(level)
    for name, lvl in noisy.items():
        logging.getLogger(name).setLevel(lvl)


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_configure_logging_non_tty_writes_json_lines_with_bound_context() -> None:
    # Given logging configured on a plain (non-TTY) stream
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    log = structlog.get_logger("hudi_clusterd.test")

    # When work for one group logs inside a bound context, and once outside it
    with bound_contextvars(table="orders", instant="20240101000000000", group=3):
        log.info("group started", files=4)
        log.warning("group slow")
    log.info("idle")

    # Then each line is JSON with timestamp, level, logger and the bound keys only where bound
    started, slow, idle = json_lines(stream)
    assert started["event"] == "group started"
    assert started["level"] == "info"
    assert started["logger"] == "hudi_clusterd.test"
    assert started["files"] == 4
    assert datetime.fromisoformat(started["timestamp"]).utcoffset() is not None
    for line in (started, slow):
        assert (line["table"], line["instant"], line["group"]) == ("orders", "20240101000000000", 3)
    assert slow["level"] == "warning"
    assert "table" not in idle


def test_configure_logging_routes_stdlib_records_through_the_same_renderer() -> None:
    # Given JSON logging
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)

    # When a library logs through stdlib logging inside a bound context
    with bound_contextvars(table="orders"):
        logging.getLogger("some.library").warning("disk %s is %d%% full", "/data", 91)

    # Then it comes out as a JSON line with the formatted message and the context
    (line,) = json_lines(stream)
    assert line["event"] == "disk /data is 91% full"
    assert line["logger"] == "some.library"
    assert line["level"] == "warning"
    assert line["table"] == "orders"


def test_configure_logging_holds_py4j_and_pyspark_at_warning() -> None:
    # Given DEBUG logging
    stream = io.StringIO()
    configure_logging("DEBUG", stream=stream)

    # When py4j chatters at INFO and pyspark warns
    logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
    logging.getLogger("pyspark.sql").warning("real problem")
    structlog.get_logger("hudi_clusterd.test").debug("ours at debug")

    # Then only the warning and our own debug line are written
    assert [line["event"] for line in json_lines(stream)] == ["real problem", "ours at debug"]


def test_configure_logging_holds_watchdog_at_warning() -> None:
    # Given DEBUG logging
    stream = io.StringIO()
    configure_logging("DEBUG", stream=stream)

    # When watchdog logs a file event at DEBUG (one per write of a log file in a watched folder) and then an error
    logging.getLogger("watchdog.observers.inotify_move_event_grouper").debug("in-event PathedInotifyEvent(...)")
    logging.getLogger("watchdog.observers.inotify").error("queue_events() called when the thread is inactive")

    # Then only the error is written
    assert [line["event"] for line in json_lines(stream)] == ["queue_events() called when the thread is inactive"]


def test_configure_logging_level_filters_our_lines() -> None:
    stream = io.StringIO()
    configure_logging("warning", stream=stream)
    log = structlog.get_logger("hudi_clusterd.test")
    log.info("hidden")
    log.error("shown")
    assert [line["event"] for line in json_lines(stream)] == ["shown"]


def test_configure_logging_exception_is_rendered_in_json() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    try:
        raise ValueError("bad value 7")
    except ValueError:
        structlog.get_logger("hudi_clusterd.test").exception("step failed")
    (line,) = json_lines(stream)
    assert line["event"] == "step failed"
    assert "ValueError: bad value 7" in line["exception"]


def test_configure_logging_tty_uses_console_renderer() -> None:
    # Given a TTY stream and fmt auto
    stream = TtyStream()
    configure_logging("INFO", stream=stream)

    # When logging with bound context
    with bound_contextvars(table="orders"):
        structlog.get_logger("hudi_clusterd.test").info("hello console")

    # Then the line is human-readable, not JSON, and still shows the context
    text = stream.getvalue()
    assert "hello console" in text
    assert "orders" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_configure_logging_json_format_forced_on_tty() -> None:
    stream = TtyStream()
    configure_logging("INFO", fmt="json", stream=stream)
    structlog.get_logger("hudi_clusterd.test").info("forced")
    assert json_lines(stream)[0]["event"] == "forced"


def test_configure_logging_twice_replaces_handler_without_duplicates() -> None:
    # Given logging configured twice, to two streams
    first, second = io.StringIO(), io.StringIO()
    configure_logging(stream=first)
    configure_logging(stream=second)

    # When one line is logged
    structlog.get_logger("hudi_clusterd.test").info("once")

    # Then it appears once, on the latest stream only
    assert first.getvalue() == ""
    assert [line["event"] for line in json_lines(second)] == ["once"]


def test_configure_logging_rejects_unknown_level_and_format() -> None:
    with pytest.raises(ConfigError, match=r"log level: must be one of .*got 'LOUD'"):
        configure_logging("LOUD", stream=io.StringIO())
    with pytest.raises(ConfigError, match="log format"):
        configure_logging("INFO", fmt="xml", stream=io.StringIO())  # type: ignore[arg-type]


def test_default_stream_follows_sys_stderr_as_it_is_at_each_write(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given logging configured without a stream, then sys.stderr replaced (and the first one closed)
    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    configure_logging("INFO", fmt="json")
    first.close()
    second = io.StringIO()
    monkeypatch.setattr("sys.stderr", second)
    # When a line is logged
    structlog.get_logger("hudi_clusterd.test").info("after the swap")
    # Then it went to the stream sys.stderr is now
    assert [line["event"] for line in json_lines(second)] == ["after the swap"]


def test_the_cli_binds_the_table_only_while_its_command_runs(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from hudi_clusterd.cli import main

    # When a one-shot command fails on a path that holds no table
    code = main(["status", "--base-path", str(tmp_path / "missing")])
    # Then it failed with one line, and left no logging context behind for whatever the process does next
    assert code != 0 and capsys.readouterr().err.startswith("error: ")
    assert structlog.contextvars.get_contextvars() == {}
