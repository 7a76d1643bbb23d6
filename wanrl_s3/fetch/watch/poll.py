"""Reading LATEST: a conditional GET on its ETag, at a jittered interval.

A poll with nothing new moves no data (304). The version wanted is the one
LATEST names now, not the highest it ever named: a pointer to a version that
never appears is dropped as soon as LATEST changes again (the subscriber still
refuses a rollback below a version it has followed). A newer version is
offered to the prefetcher; failed reads back off up to ``max_backoff_s``.
"""

from __future__ import annotations

import logging

from ...format.latest import Latest
from .failures import Streak, describe
from .prefetch import Prefetcher
from .state import Shared
from .visibility import Visibility

log = logging.getLogger(__name__)


class LatestPoller:
    """The poll thread of one watcher."""

    def __init__(self, shared: Shared, visibility: Visibility, prefetch: Prefetcher) -> None:
        self._shared, self._visibility, self._prefetch = shared, visibility, prefetch
        self._etag: str | None = None  # of the last LATEST read from the current store
        self._streak = Streak(shared.config.poll_backoff, shared.rng)

    def forget_etag(self) -> None:
        """Another store: its LATEST is read whole on the next poll (the caller holds the lock)."""
        self._etag = None

    def poll_once(self) -> Latest | None:
        """One conditional GET of LATEST; a newer version is offered to the prefetcher."""
        shared, st = self._shared, self._shared.state
        with shared.lock:
            sub, etag = st.sub, self._etag
        start_s = shared.clock.monotonic()
        polled = sub.poll_latest(etag)
        shared.observer.polled(
            shared.clock.monotonic() - start_s, None if polled is None else polled[0].version
        )
        if polled is None:
            return None
        latest = polled[0]
        with shared.lock:
            if st.sub is not sub:  # switched stores meanwhile: that answer is stale
                return None
            self._etag = polled[1]
            if latest.version != st.want:
                st.follow(latest.version)
                self._visibility.reset()
            held = st.held_version()
            if held is not None and latest.version <= held:
                return latest
            st.seen_at_s.setdefault(latest.version, shared.clock.time())
        self._prefetch.offer(latest.version)
        return latest

    def run(self) -> None:
        """The thread's loop: poll, then wait the interval (or back off after a failure)."""
        shared = self._shared
        while not shared.stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:  # a poll thread that dies freezes the worker unseen
                wait_s = self._streak.fail()
                shared.failures.record("poll", f"reading LATEST failed: {describe(exc)}")
            else:
                if failed := self._streak.reset():
                    log.info("reading LATEST works again after %d failed attempts", failed)
                shared.failures.clear("poll")
                wait_s = shared.config.next_wait_s(shared.rng)
            shared.stop.wait(wait_s)
