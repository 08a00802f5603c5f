"""structlog configuration for the whole process, done once by the entry point.

Modules only call ``structlog.get_logger(__name__)``. The entry point calls ``configure_logging()``; after
that every line, ours or a library's (py4j, pyspark, watchdog), goes through one stdlib handler and one
renderer:

* JSON lines when the stream is not a TTY (containers, systemd), a coloured console renderer on a TTY;
* each line carries ``timestamp`` (ISO 8601, UTC), ``level``, ``logger`` and ``event``;
* context bound with ``structlog.contextvars.bound_contextvars(table=..., instant=..., group=...)`` appears on
  every line logged inside that block, by our code or by a library on the same thread.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Final, Literal, TextIO

import structlog
from structlog.typing import Processor

from hudi_clusterd.errors import ConfigError
from hudi_clusterd.ops.events import (
    Event,
    GroupFinished,
    GroupStarted,
    Outcome,
    PlanFinished,
    PlanScheduled,
    PlanStarted,
)

LogFormat = Literal["auto", "json", "console"]

LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("auto", "json", "console")

NOISY_LOGGERS: Final = ("py4j", "pyspark", "watchdog", "botocore", "boto3", "urllib3")
"""Library loggers held at WARNING whatever the configured level (py4j logs every gateway call at INFO; watchdog
logs every file event in the watched folders at DEBUG, among them each write of a log file kept there; botocore,
boto3 and urllib3, the DynamoDB lock's client, log every request at DEBUG with its signing steps, headers and
response body, the access key id among them)."""

_HANDLER_NAME: Final = "hudi_clusterd"


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record is emitted."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure_logging(level: str = "INFO", fmt: LogFormat = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog and stdlib logging for the process; calling it again replaces the previous setup.

    ``level`` is a stdlib level name (case-insensitive). ``fmt="auto"`` picks the console renderer when
    ``stream`` is a TTY and JSON lines otherwise. ``stream`` defaults to ``sys.stderr`` (read at call time).
    Raises ``ConfigError`` for an unknown level or format.
    """
    level_name = level.upper()
    if level_name not in LEVELS:
        raise ConfigError(f"log level: must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in LOG_FORMATS:
        raise ConfigError(f"log format: must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    out: TextIO = stream if stream is not None else sys.stderr
    is_tty = _isatty(out)
    use_console = fmt == "console" or (fmt == "auto" and is_tty)

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    render: list[Processor]
    if use_console:
        render = [structlog.dev.ConsoleRenderer(colors=is_tty)]
    else:
        render = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
    )
    handler: logging.StreamHandler[TextIO] = logging.StreamHandler(out) if stream is not None else _StderrHandler()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)

    root = logging.getLogger()
    _remove_our_handlers(root)
    root.addHandler(handler)
    root.setLevel(level_name)
    noisy_level = max(logging.WARNING, logging.getLevelNamesMapping()[level_name])
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(noisy_level)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: module-level loggers then follow a later configure_logging() (and test capture).
        cache_logger_on_first_use=False,
    )


def reset_logging() -> None:
    """Undo ``configure_logging``: remove our handler and restore structlog's defaults (for tests)."""
    _remove_our_handlers(logging.getLogger())
    structlog.reset_defaults()


def _remove_our_handlers(root: logging.Logger) -> None:
    for existing in list(root.handlers):
        if existing.get_name() == _HANDLER_NAME:
            root.removeHandler(existing)
            existing.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


__all__ = ["LEVELS", "LOG_FORMATS", "NOISY_LOGGERS", "LogFormat", "configure_logging", "reset_logging"]


class EventLog:
    """Logs the events of table operations (an ``ops.events.Observer``), one line each, with their fields."""

    def __init__(self) -> None:
        self.log = structlog.get_logger("hudi_clusterd.events")

    def notify(self, event: Event) -> None:
        fields = {k: v for k, v in dataclasses.asdict(event).items() if k != "table"}
        if isinstance(event, PlanScheduled):
            self.log.info("scheduled clustering", **fields)
        elif isinstance(event, PlanStarted):
            self.log.info("plan started", **fields)
        elif isinstance(event, GroupStarted):
            self.log.info("group started", **fields)
        elif isinstance(event, GroupFinished):
            self.log.info("group finished", **fields)
        elif isinstance(event, PlanFinished):
            fields["outcome"] = event.outcome.value
            if event.outcome is Outcome.COMPLETED:
                self.log.info("clustering completed", **fields)
            else:
                self.log.info("plan finished", **fields)
        else:
            self.log.debug(type(event).__name__, **fields)
