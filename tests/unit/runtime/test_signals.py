"""ShutdownController with real signals sent to this process and an injected hard_exit."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from hudi_clusterd.exit_codes import EXIT_SIGNAL_FORCED
from hudi_clusterd.runtime.signals import HANDLED_SIGNALS, ShutdownController, signals_blocked

WAIT = 10.0  # generous: only reached when something is broken


class FakeExit:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.called = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.called.set()


@pytest.fixture
def hard_exit() -> FakeExit:
    return FakeExit()


@pytest.fixture
def controller(hard_exit: FakeExit) -> Iterator[ShutdownController]:
    ctl = ShutdownController(hard_exit=hard_exit)
    ctl.install()
    try:
        yield ctl
    finally:
        ctl.restore()


def test_shutdown_first_sigterm_requests_graceful_stop(controller: ShutdownController, hard_exit: FakeExit) -> None:
    # When the process receives SIGTERM
    os.kill(os.getpid(), signal.SIGTERM)

    # Then the stop is requested, and nothing exited
    assert controller.stop_requested.wait(WAIT)
    assert hard_exit.codes == []
    assert not controller.reload_requested.is_set()


def test_shutdown_second_signal_calls_hard_exit_with_forced_code(
    controller: ShutdownController, hard_exit: FakeExit
) -> None:
    # Given a graceful stop already started by SIGINT
    os.kill(os.getpid(), signal.SIGINT)
    assert controller.stop_requested.wait(WAIT)

    # When a second stop signal arrives
    os.kill(os.getpid(), signal.SIGTERM)

    # Then the process is told to exit at once with EXIT_SIGNAL_FORCED
    assert hard_exit.called.wait(WAIT)
    assert hard_exit.codes == [EXIT_SIGNAL_FORCED]


def test_shutdown_sighup_requests_reload_not_stop(controller: ShutdownController) -> None:
    # When SIGHUP arrives
    os.kill(os.getpid(), signal.SIGHUP)

    # Then a reload is requested (once) and no stop
    assert controller.reload_requested.wait(WAIT)
    assert controller.consume_reload_request() is True
    assert controller.consume_reload_request() is False
    assert not controller.stop_requested.is_set()


def test_shutdown_sighup_after_stop_does_not_count_as_second_signal(
    controller: ShutdownController, hard_exit: FakeExit
) -> None:
    # Given a graceful stop in progress
    os.kill(os.getpid(), signal.SIGTERM)
    assert controller.stop_requested.wait(WAIT)

    # When a SIGHUP arrives
    os.kill(os.getpid(), signal.SIGHUP)

    # Then it is a reload request, not a forced exit
    assert controller.reload_requested.wait(WAIT)
    assert hard_exit.codes == []


def test_shutdown_restore_puts_back_previous_handlers(hard_exit: FakeExit) -> None:
    # Given the handlers in place before install
    before = {sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS}
    ctl = ShutdownController(hard_exit=hard_exit)

    # When installed then restored
    ctl.install()
    assert all(signal.getsignal(sig) != before[sig] for sig in HANDLED_SIGNALS)
    ctl.restore()

    # Then the original handlers are back and the dispatcher thread is gone
    assert {sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS} == before
    assert not [t for t in threading.enumerate() if t.name == "signal-dispatch"]
    ctl.restore()  # a second restore is a no-op


def test_shutdown_install_twice_raises(controller: ShutdownController) -> None:
    with pytest.raises(RuntimeError, match="twice"):
        controller.install()


def test_shutdown_install_outside_main_thread_raises_clear_error(hard_exit: FakeExit) -> None:
    # When install() is called from a worker thread
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            ShutdownController(hard_exit=hard_exit).install()
        except RuntimeError as exc:
            errors.append(exc)

    worker = threading.Thread(target=attempt, name="not-main")
    worker.start()
    worker.join(WAIT)

    # Then it fails with a message naming the rule and the thread
    assert len(errors) == 1
    assert "main thread" in str(errors[0])
    assert "not-main" in str(errors[0])


def test_signals_blocked_holds_signal_until_handlers_are_installed(hard_exit: FakeExit) -> None:
    # Given a controller installed while signals are blocked (the boot sequence)
    ctl = ShutdownController(hard_exit=hard_exit)
    try:
        with signals_blocked():
            ctl.install()
            # When SIGHUP is sent to the main thread during boot
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGHUP)
            # Then it stays pending and is not handled yet
            assert signal.SIGHUP in signal.sigpending()
            assert not ctl.reload_requested.is_set()
        # Then leaving the block delivers it to the installed handler
        assert ctl.reload_requested.wait(WAIT)
        assert signal.SIGHUP not in signal.sigpending()
    finally:
        ctl.restore()
