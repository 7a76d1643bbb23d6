"""One publication at a time, on a background thread, off the trainer's critical path.

The trainer's sync copies its weights to host buffers and hands the publication
(encode, upload, commit, LATEST) to :class:`BackgroundPublications`; training goes
on. The next publication waits for this one, and learns how it ended:

* its figures (the metrics a synchronous sync would have returned), reported at the
  next sync;
* or its error, raised at the next sync as :class:`PublicationFailedError` (``from``
  the cause) and logged when it happens: a dead publication is never silent.

At interpreter exit a publication still in flight is given ``close_wait_s`` to
finish (logged either way). The wait runs from ``threading``'s own exit hooks,
before ``concurrent.futures`` stops accepting work (which the uploads need); a
process killed outright leaves nothing half-visible, because a version becomes
visible only when its manifest is committed, after its last payload byte.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (its exit hook must be registered before ours)
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from wanrl_s3.errors import WanrlError

log = logging.getLogger(__name__)
Outcome = dict[str, float]


class PublicationFailedError(WanrlError, RuntimeError):
    """A background publication failed; raised at the next sync, from its cause."""


@dataclass
class _Flight:
    """A publication handed to the background thread, and how it ended."""

    version: int
    started_s: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    outcome: Outcome | None = None
    error: BaseException | None = None

    def failure(self) -> PublicationFailedError:
        return PublicationFailedError(
            f"wanrl_s3: the background publication of v{self.version} failed: "
            f"{type(self.error).__name__}: {self.error}"
        )


class BackgroundPublications:
    """Runs publications one at a time on a daemon thread; the caller collects each outcome."""

    def __init__(self, close_wait_s: float) -> None:
        self.close_wait_s = close_wait_s
        self._flight: _Flight | None = None
        _LIVE.add(self)

    @property
    def in_flight(self) -> int | None:
        """The version being published, or None."""
        flight = self._flight
        return None if flight is None or flight.done.is_set() else flight.version

    def start(self, version: int, job: Callable[[], Outcome]) -> None:
        """Publish in the background; the previous outcome must have been collected."""
        if self._flight is not None:
            raise RuntimeError("collect the previous publication before starting another")
        flight = self._flight = _Flight(version)
        threading.Thread(
            target=self._run, args=(flight, job), name=f"wanrl-publish-v{version}", daemon=True
        ).start()

    @staticmethod
    def _run(flight: _Flight, job: Callable[[], Outcome]) -> None:
        try:
            flight.outcome = job()
        except BaseException as exc:  # surfaced at the next sync; logged now, loudly
            flight.error = exc
            log.error(
                "wanrl_s3: the background publication of v%d failed; the next sync raises: %s",
                flight.version,
                exc,
                exc_info=exc,
            )
        finally:
            flight.done.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the publication in flight; True when none is (left) in flight."""
        flight = self._flight
        return flight is None or flight.done.wait(timeout_s)

    def peek(self) -> Outcome | None:
        """The finished publication's figures (not collected); raises if it failed."""
        flight = self._flight
        if flight is None or not flight.done.is_set():
            return None
        if flight.error is not None:
            raise flight.failure() from flight.error
        return {"wanrl_s3/version": float(flight.version), **(flight.outcome or {})}

    def collect(self) -> Outcome | None:
        """Like :meth:`peek`, and forget it: each outcome is reported (or raised) once."""
        try:
            return self.peek()
        finally:
            if self._flight is not None and self._flight.done.is_set():
                self._flight = None

    def close(self) -> bool:
        """Let a publication in flight finish, within ``close_wait_s``; True if none is left.

        A publication given up on is not cancelled: it may still commit, whole,
        while the process lives; if the process ends first, nothing of it is visible.
        """
        flight = self._flight
        if flight is None or flight.done.is_set():
            return True
        log.info(
            "wanrl_s3: waiting up to %g s for the publication of v%d to finish",
            self.close_wait_s,
            flight.version,
        )
        if flight.done.wait(self.close_wait_s):
            log.info(
                "wanrl_s3: the publication of v%d finished %.2f s after it started",
                flight.version,
                time.monotonic() - flight.started_s,
            )
            return True
        log.error(
            "wanrl_s3: the publication of v%d did not finish within close_wait_s=%g; giving "
            "up on it (readers see it only if it commits, whole, before the process ends)",
            flight.version,
            self.close_wait_s,
        )
        return False


_LIVE: weakref.WeakSet[BackgroundPublications] = weakref.WeakSet()


def _finish_all() -> None:
    """At interpreter exit: give every publication in flight its bounded time to finish."""
    for publications in list(_LIVE):
        try:
            publications.close()
        except Exception:  # an exit hook must not stop the others
            log.exception("wanrl_s3: closing the background publications failed")


# threading's exit hooks run before its non-daemon threads are joined, in reverse order
# of registration: so ours runs before concurrent.futures refuses new work (the uploads
# need its pools). A plain atexit hook would run after that, too late.
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_finish_all)
else:  # pragma: no cover (CPython has it since 3.9)
    import atexit

    atexit.register(_finish_all)
