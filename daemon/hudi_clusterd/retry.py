"""The one retry policy of the daemon: deadline-bounded, exponential back-off with jitter, on `tenacity`.

Every loop that waits for a storage, a lock service or a lock to answer again goes through a `RetryPolicy`:
the storages (a throttled or unanswered request), the lock providers (a connection retried, a held lock polled) and
the clean-up after a commit. A policy is immutable; ``deadline_s`` bounds the whole run of attempts (the last
error is raised once it has passed), ``first_s`` is the first pause, doubled after each attempt up to ``cap_s``,
each pause drawn with up to ``jitter_s`` added so that writers that failed together do not retry together.

Two ways to use one::

    value = policy.call(fn, retry_on=is_transient)          # a function, retried while retry_on(error) holds

    for attempt in policy.attempts(retry_on=is_transient):  # a block, for loops that decide more themselves
        with attempt:
            ...

``sleep`` is injectable (tests pass a fake clock's), and ``clock`` measures the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

from hudi_clusterd.errors import TransientStorageError

__all__ = ["NO_RETRY", "STORAGE_RETRY", "RetryPolicy", "is_transient"]

T = TypeVar("T")


def is_transient(e: BaseException) -> bool:
    """Whether ``e`` says the store did not answer, or asked us to come back later: worth the same call again."""
    return isinstance(e, TransientStorageError)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries bounded by a deadline (see the module docstring)."""

    deadline_s: float = 20.0
    first_s: float = 0.1
    cap_s: float = 2.0
    jitter_s: float = 0.1
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def _retrying(self, retry_on: Callable[[BaseException], bool],
                  on_retry: Callable[[BaseException, float], None] | None) -> tenacity.Retrying:
        def before_sleep(state: tenacity.RetryCallState) -> None:
            if on_retry is not None and state.outcome is not None:
                error = state.outcome.exception()
                if error is not None:
                    on_retry(error, state.upcoming_sleep)

        start = self.clock()
        deadline = self.deadline_s

        def past_deadline(state: tenacity.RetryCallState) -> bool:
            return self.clock() - start >= deadline

        return tenacity.Retrying(
            stop=past_deadline,
            wait=tenacity.wait_exponential(multiplier=self.first_s, max=self.cap_s)
            + tenacity.wait_random(0, self.jitter_s),
            retry=tenacity.retry_if_exception(retry_on),
            sleep=self.sleep,
            reraise=True,
            before_sleep=before_sleep,
        )

    def call(self, fn: Callable[[], T], *, retry_on: Callable[[BaseException], bool] = is_transient,
             on_retry: Callable[[BaseException, float], None] | None = None) -> T:
        """``fn()``, called again after a pause while it raises an error ``retry_on`` accepts and the deadline has
        not passed; the last error otherwise. ``on_retry(error, pause_s)`` is told of each retry."""
        result: T = self._retrying(retry_on, on_retry)(fn)
        return result

    def attempts(self, *, retry_on: Callable[[BaseException], bool] = is_transient,
                 on_retry: Callable[[BaseException, float], None] | None = None
                 ) -> Iterator[tenacity.AttemptManager]:
        """The attempts of a block: ``for attempt in policy.attempts(): with attempt: ...`` (``break`` or
        ``return`` inside the block once it succeeded)."""
        yield from self._retrying(retry_on, on_retry)


STORAGE_RETRY = RetryPolicy()
"""A storage request the store did not answer, or throttled: tried again for up to 20 s."""

NO_RETRY = RetryPolicy(deadline_s=0.0)
"""One attempt: the first error is raised."""
