"""What a watcher's background work failed at, and how long it waits before trying again.

Each failure of the poll and download threads is logged in one line and kept
as the current failure of its kind (:class:`FailureLog`); the worker writes the
newest into its status object, and a success clears its kind. Failures of one
kind in a row back off (:class:`Streak`), so a fleet does not hammer a store
that is down. A thread's loop runs under :func:`run_guarded`, so that even the
exception that ends it is recorded.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import WanrlError
from ...store import Clock
from ...store.retry import Backoff
from .observer import IGNORE, WatchObserver

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failure:
    """What a watcher's background work last failed at, for logs and the status object.

    ``what`` is "poll" (reading LATEST), "visibility" (a version LATEST names is
    still not whole after the grace period), "download" (download, verify or
    decode) or "thread" (a thread ended: fatal); a region failover adds
    "region". ``at_s`` is wall-clock time.
    """

    what: str
    message: str
    at_s: float
    # the exception behind it, for a caller that cannot go on after some kinds (a worker
    # whose staging directory is full exits on a LocalIOError rather than retry forever)
    cause: BaseException | None = field(default=None, compare=False, repr=False)


class FailureLog:
    """The current failure of each kind, written by both threads and read by the caller;
    each one recorded is also told to ``observer`` (metrics count them by kind)."""

    def __init__(self, clock: Clock, observer: WatchObserver = IGNORE) -> None:
        self._clock, self._observer = clock, observer
        self._lock = threading.Lock()
        self._current: dict[str, Failure] = {}

    def record(
        self,
        what: str,
        message: str,
        *,
        fatal: bool = False,
        log_it: bool = True,
        cause: BaseException | None = None,
    ) -> None:
        """Log a failure in one line and keep it as the current failure of its kind."""
        if log_it:
            (log.error if fatal else log.warning)("%s", message)
        failure = Failure(what, message, self._clock.time(), cause)
        with self._lock:
            self._current[what] = failure
        self._observer.failed(failure)

    def clear(self, what: str) -> None:
        with self._lock:
            self._current.pop(what, None)

    def get(self, what: str) -> Failure | None:
        with self._lock:
            return self._current.get(what)

    def newest(self) -> Failure | None:
        with self._lock:
            return max(self._current.values(), key=lambda f: f.at_s, default=None)


class Streak:
    """Failures of one kind in a row, and the wait their backoff asks for before the next try."""

    def __init__(self, backoff: Backoff, rng: random.Random) -> None:
        self._backoff, self._rng = backoff, rng
        self._lock = threading.Lock()  # switch() resets a streak from the caller's thread
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    def fail(self) -> float:
        """Count one more failure; the wait before the next try."""
        with self._lock:
            self._count += 1
            return self._backoff.wait_s(self._count, self._rng)

    def reset(self) -> int:
        """A success (or a fresh start): the next failure waits the first wait again.
        Returns how many failures there were."""
        with self._lock:
            count, self._count = self._count, 0
            return count


def describe(exc: BaseException) -> str:
    """One line for a failure: our errors speak for themselves; anything else is named."""
    if isinstance(exc, WanrlError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {exc}"


def run_guarded(loop: Callable[[], None], name: str, failures: FailureLog) -> None:
    """Run a thread's loop; an exception that ends it is recorded, never silent.

    The loops catch every ``Exception`` themselves and go on; what reaches
    here (``SystemExit``, ``KeyboardInterrupt`` raised in the thread) ends the
    thread, and :meth:`Watcher.check_alive` reports it.
    """
    try:
        loop()
    except BaseException as exc:
        failures.record("thread", f"the {name} thread stopped: {describe(exc)}", fatal=True)
        raise
