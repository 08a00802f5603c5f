"""Hot reload as "parse fully, then swap one reference".

``SettingsHolder`` holds the current immutable settings. A reload calls a loader that parses and validates the
whole file; only a complete, valid result replaces the reference, in one assignment. Readers take
``holder.current`` once per tick and use that object for the whole tick, so a tick never mixes two configs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Literal, TypeVar

import structlog

from hudi_clusterd.errors import ClusterdError, ConfigError

log = structlog.get_logger(__name__)

T = TypeVar("T")

ReloadOutcome = Literal["success", "failure"]
"""How a configuration reload ended."""


class SettingsHolder(Generic[T]):
    """The current settings object, replaced atomically by ``try_reload``.

    ``current`` is a plain attribute read (no lock), so readers never wait on a reload in progress. Reloads
    are serialised among themselves. ``on_result`` is called with ``"success"`` or ``"failure"`` after each
    reload (the daemon counts them in metrics); the log line of each successful swap numbers it (``generation``).
    """

    def __init__(self, initial: T, *, on_result: Callable[[ReloadOutcome], None] | None = None) -> None:
        self._current = initial
        self._generation = 0
        self._on_result = on_result
        self._reload_lock = threading.Lock()

    @property
    def current(self) -> T:
        """The settings in force; read once per unit of work and keep the object for its duration."""
        return self._current

    def try_reload(self, loader: Callable[[], T]) -> bool:
        """Load new settings with ``loader`` and swap them in; keep the current ones if loading fails.

        A ``ClusterdError`` (``ConfigError`` for an invalid file) is logged with its message and every
        problem it lists. Any other exception is a bug in the loader: it is logged with its traceback and
        the current settings are kept as well, so a reload can never take the daemon down. Returns True when
        the new settings are in force.
        """
        with self._reload_lock:
            outcome = self._reload(loader)
        self._report(outcome)
        return outcome == "success"

    def _reload(self, loader: Callable[[], T]) -> ReloadOutcome:
        try:
            new = loader()
        except ClusterdError as exc:
            problems = exc.problems if isinstance(exc, ConfigError) else []
            log.error(
                "config reload rejected; keeping the current config",
                error=exc.message,
                problems=problems,
                generation=self._generation,
            )
            return "failure"
        except Exception:
            log.exception("config reload failed unexpectedly; keeping the current config")
            return "failure"
        changed = new != self._current
        self._current = new  # the swap: one reference assignment
        self._generation += 1
        log.info("config reloaded", changed=changed, generation=self._generation)
        return "success"

    def _report(self, outcome: ReloadOutcome) -> None:
        if self._on_result is None:
            return
        try:
            self._on_result(outcome)
        except Exception:
            log.exception("reload result hook raised", outcome=outcome)


__all__ = ["ReloadOutcome", "SettingsHolder"]
