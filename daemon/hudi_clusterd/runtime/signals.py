"""Process signals: SIGTERM/SIGINT stop the daemon in two stages, SIGHUP asks for a config reload.

* First SIGTERM or SIGINT: ``stop_requested`` is set (the daemon stops scheduling and lets running groups finish
  within the grace period).
* Second SIGTERM or SIGINT: ``hard_exit(EXIT_SIGNAL_FORCED)`` at once, from the signal handler itself, so a
  stuck loop cannot hold it back.
* SIGHUP: ``reload_requested`` is set.

The Python-level handler does almost nothing: it counts stop signals and puts the signal number on a
``queue.SimpleQueue`` (whose ``put`` is reentrant, hence safe in a signal handler). A dispatcher thread sets
the Events, so the handler never takes a non-reentrant lock that the interrupted main
thread may hold (an ``Event``'s condition, for one). Only the forced exit logs from the handler: logging's
locks are reentrant.

Boot order, as dramatiq does it: block the handled signals with ``signals_blocked()`` before starting threads
(they inherit the mask), install the handlers, and leave the block: a signal that arrived during boot is then
delivered to the installed handler instead of killing a half-started process.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Final

import structlog

from hudi_clusterd.exit_codes import EXIT_SIGNAL_FORCED

log = structlog.get_logger(__name__)

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
RELOAD_SIGNAL: Final = signal.SIGHUP
HANDLED_SIGNALS: Final = (*STOP_SIGNALS, RELOAD_SIGNAL)

_SignalHandler = Callable[[int, FrameType | None], object] | int | None
_SHUTDOWN_DISPATCH: Final = -1  # sentinel on the queue: the dispatcher thread ends


class ShutdownController:
    """Turns process signals into the ``stop_requested`` and ``reload_requested`` Events.

    ``hard_exit`` is called with ``EXIT_SIGNAL_FORCED`` on the second stop signal; it defaults to
    ``os._exit`` (no cleanup, no flushing beyond what the log handler already did); tests inject their own.
    """

    def __init__(self, *, hard_exit: Callable[[int], object] = os._exit) -> None:
        self.stop_requested = threading.Event()
        self.reload_requested = threading.Event()
        self._hard_exit = hard_exit
        self._stopping = False  # read and written by the dispatcher thread only
        self._stop_signals_seen = 0  # written only by the signal handler (main thread)
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._dispatcher: threading.Thread | None = None
        self._previous: dict[signal.Signals, _SignalHandler] = {}

    # -- install / restore -----------------------------------------------------------------------------

    def install(self) -> None:
        """Install handlers for SIGTERM, SIGINT and SIGHUP; remember the previous ones for ``restore()``."""
        _require_main_thread("ShutdownController.install()")
        if self._dispatcher is not None:
            raise RuntimeError("ShutdownController.install() called twice without restore()")
        self._dispatcher = threading.Thread(target=self._dispatch, name="signal-dispatch", daemon=True)
        self._dispatcher.start()
        for sig in HANDLED_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        """Put back the handlers found by ``install()`` and stop the dispatcher; no-op if not installed."""
        _require_main_thread("ShutdownController.restore()")
        dispatcher = self._dispatcher
        if dispatcher is None:
            return
        for sig, previous in self._previous.items():
            # None means "installed outside Python"; the closest we can restore is the default action.
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()
        self._queue.put(_SHUTDOWN_DISPATCH)
        dispatcher.join()
        self._dispatcher = None

    def __enter__(self) -> ShutdownController:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    # -- requests --------------------------------------------------------------------------------------

    def consume_reload_request(self) -> bool:
        """True (and clear the request) when a reload was requested since the last call."""
        if self.reload_requested.is_set():
            self.reload_requested.clear()
            return True
        return False

    # -- internals -------------------------------------------------------------------------------------

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        """The Python-level signal handler: runs on the main thread between two bytecodes."""
        if signum in STOP_SIGNALS:
            self._stop_signals_seen += 1
            if self._stop_signals_seen >= 2:
                log.warning("second stop signal: exiting at once", signal=signal.Signals(signum).name)
                self._hard_exit(EXIT_SIGNAL_FORCED)
                return
        self._queue.put(signum)

    def _dispatch(self) -> None:
        while True:
            signum = self._queue.get()
            if signum == _SHUTDOWN_DISPATCH:
                return
            sig = signal.Signals(signum)
            if sig in STOP_SIGNALS:
                self._begin_stop(sig)
            else:
                log.info("reload requested", signal=sig.name)
                self.reload_requested.set()

    def _begin_stop(self, sig: signal.Signals) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("graceful stop requested; a second SIGTERM/SIGINT exits at once", reason=f"signal {sig.name}")
        self.stop_requested.set()


def _require_main_thread(what: str) -> None:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            f"{what} must run in the main thread: Python runs signal handlers only there "
            f"(called from thread {threading.current_thread().name!r})"
        )


@contextlib.contextmanager
def signals_blocked(signals: tuple[signal.Signals, ...] = HANDLED_SIGNALS) -> Iterator[None]:
    """Block ``signals`` in this thread (and threads it starts) inside the block, then restore the mask.

    Signals arriving meanwhile stay pending and are delivered, to whatever handler is installed by then, when
    the block ends.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


__all__ = ["HANDLED_SIGNALS", "RELOAD_SIGNAL", "STOP_SIGNALS", "ShutdownController", "signals_blocked"]
