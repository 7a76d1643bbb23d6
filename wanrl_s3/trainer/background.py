"""One publication at a time on a daemon thread, each with its ``Future``.

A trainer hands a publication (encode, upload, commit, LATEST) to
:class:`Background` and goes on training. The publication ends in its future:
its value, or :class:`~wanrl_s3.errors.PublicationFailedError` raised ``from``
the cause and logged when it happens, so a dead publication is never silent.
The future remembers whether the caller has seen that failure
(:attr:`PublicationFuture.seen`), so that the trainer core raises it once.

Why a daemon thread per publication and not an executor: ``concurrent.futures``
joins its workers at interpreter exit without a bound. Here a publication still in
flight at exit is given ``close_wait_s`` to finish (logged either way), from
``threading``'s own exit hooks, which run before ``concurrent.futures`` stops
accepting work (the uploads need its pools). A process killed outright leaves
nothing half-visible: a version becomes visible only when its manifest is
committed, after its last payload byte.

Finishing waits for the publication's thread to end, not only for its future:
the thread resolves the future and only then drops the job, whose torch tensors
free their memory with the GIL released. Were the interpreter finalizing by
then, CPython (before 3.14) would end the thread with ``pthread_exit`` as it
took the GIL back, unwinding through torch's C++ frames: ``std::terminate`` and
SIGABRT after a publication that succeeded.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered before ours)
import logging
import threading
import time
import weakref
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import PublicationFailedError, UsageError
from ..store import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)
T = TypeVar("T")


class PublicationFuture(Future[T]):
    """A publication's future that records whether its failure reached the caller.

    ``seen`` turns true once :meth:`result` or :meth:`exception` hands the failure
    over (or the trainer core raises it elsewhere): a failure is raised once.
    """

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def result(self, timeout: float | None = None) -> T:
        try:
            return super().result(timeout)
        except PublicationFailedError:
            self.seen = True
            raise

    def exception(self, timeout: float | None = None) -> BaseException | None:
        error = super().exception(timeout)
        if error is not None:
            self.seen = True
        return error

    def failure(self) -> PublicationFailedError | None:
        """The failure of a finished publication, without marking it seen."""
        if not self.done():
            return None
        error = super().exception()
        return error if isinstance(error, PublicationFailedError) else None


@dataclass
class _Flight:
    version: int
    started_s: float
    future: PublicationFuture[Any]
    thread: threading.Thread | None = None  # set once started


class Background:
    """Runs publications one at a time on daemon threads; each one's end is its future."""

    def __init__(self, close_wait_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.close_wait_s = close_wait_s
        self.clock = clock
        self._flight: _Flight | None = None
        _LIVE.add(self)

    @property
    def in_flight(self) -> int | None:
        """The version being published, or None."""
        flight = self._flight
        return None if flight is None or flight.future.done() else flight.version

    def start(self, version: int, job: Callable[[], T]) -> PublicationFuture[T]:
        """Publish ``version`` with ``job`` in the background; the previous one must be done."""
        if self.in_flight is not None:
            raise UsageError(f"v{self.in_flight} is still publishing: wait for it first")
        future: PublicationFuture[T] = PublicationFuture()
        future.set_running_or_notify_cancel()  # running from now on: it cannot be cancelled
        flight = _Flight(version, self.clock.monotonic(), future)
        flight.thread = threading.Thread(
            target=_run, args=(flight, job), name=f"wanrl-publish-v{version}", daemon=True
        )
        flight.thread.start()
        self._flight = flight
        return future

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the publication in flight; True when none is (left) in flight."""
        flight = self._flight
        if flight is None:
            return True
        done, _ = futures.wait([flight.future], timeout_s)  # leaves a failure unseen
        return bool(done)

    def finish(self) -> bool:
        """Let a publication in flight finish, within ``close_wait_s``; True if none is left.

        Returns once its thread has ended, not only its future (see the module
        docstring). A publication given up on is not cancelled: it may still commit,
        whole, while the process lives; if the process ends first, nothing of it is
        visible.
        """
        flight = self._flight
        if flight is None:
            return True
        deadline_s = time.monotonic() + self.close_wait_s
        if not flight.future.done() and not self._wait_logged(flight):
            return False
        thread = flight.thread
        if thread is not None and thread is not threading.current_thread():  # not a callback's
            thread.join(max(0.0, deadline_s - time.monotonic()))
            if thread.is_alive():
                log.warning(
                    "wanrl_s3: the thread of v%d's publication, which finished, did not end "
                    "within close_wait_s=%g",
                    flight.version,
                    self.close_wait_s,
                )
        return True

    def _wait_logged(self, flight: _Flight) -> bool:
        """Wait ``close_wait_s`` for the publication in flight, saying so; True if it ended."""
        log.info(
            "wanrl_s3: waiting up to %g s for the publication of v%d to finish",
            self.close_wait_s,
            flight.version,
        )
        if self.wait(self.close_wait_s):
            log.info(
                "wanrl_s3: the publication of v%d finished %.2f s after it started",
                flight.version,
                self.clock.monotonic() - flight.started_s,
            )
            return True
        log.error(
            "wanrl_s3: the publication of v%d did not finish within close_wait_s=%g; giving "
            "up on it (readers see it only if it commits, whole, before the process ends)",
            flight.version,
            self.close_wait_s,
        )
        return False


def _run(flight: _Flight, job: Callable[[], object]) -> None:
    try:
        outcome = job()
    except BaseException as exc:  # raised by the future, or at the next submit; logged now
        log.error(
            "wanrl_s3: the background publication of v%d failed; the next submit raises it: %s",
            flight.version,
            exc,
            exc_info=exc,
        )
        flight.future.set_exception(PublicationFailedError.of(flight.version, exc))
    else:
        flight.future.set_result(outcome)


_LIVE: weakref.WeakSet[Background] = weakref.WeakSet()


def _finish_all() -> None:
    """At interpreter exit: give every publication in flight its bounded time to finish."""
    for background in list(_LIVE):
        try:
            background.finish()
        except Exception:  # an exit hook must not stop the others
            log.exception("wanrl_s3: finishing the background publications failed")


# threading's exit hooks run before its non-daemon threads are joined, in reverse order
# of registration: so ours runs before concurrent.futures refuses new work (the uploads
# need its pools). A plain atexit hook would run after that, too late.
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_finish_all)
else:  # pragma: no cover (CPython has it since 3.9)
    import atexit

    atexit.register(_finish_all)
