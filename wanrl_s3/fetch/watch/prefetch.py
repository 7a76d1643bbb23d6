"""The download of a version, in the background, one at a time.

The download thread sleeps until the poller offers a newer version (or a retry
is due), checks that the version is whole in the store, downloads it as deltas
from the held version (or from the keyframe), verifies and decodes it, and
marks it ready for ``install``. A failure is recorded and backed off; a newer
LATEST, a switch of stores or ``stop`` ends the wait at once. A version
superseded mid-download is abandoned when going straight to the newer one
moves fewer bytes than finishing it first.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ...errors import FetchCancelled, WanrlError
from ..host_cache import HostCache
from ..subscriber import Snapshot, Subscriber, reusing
from .failures import Streak, describe
from .result import describe_source
from .state import Shared
from .visibility import Visibility

log = logging.getLogger(__name__)


class ByteCounter:
    """Bytes of the download in flight. Every thread of the download pool adds to it at
    once, so each addition holds a lock: a bare ``+=`` loses other threads' updates."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes = 0

    @property
    def value(self) -> int:
        with self._lock:
            return self._bytes

    def add(self, n: int) -> None:
        with self._lock:
            self._bytes += n

    def reset(self) -> None:
        with self._lock:
            self._bytes = 0


class Prefetcher:
    """The download thread of one watcher."""

    def __init__(self, shared: Shared, visibility: Visibility) -> None:
        self._shared, self._visibility = shared, visibility
        self.work = threading.Event()  # something to do: a newer version, a retry due, stop
        self.cancel = threading.Event()  # abandon the download in flight
        self.progress = ByteCounter()
        self._streak = Streak(shared.config.download_backoff, shared.rng)
        config = shared.config
        self._cache = (
            HostCache(config.host_cache_dir, keep_versions=config.keep_versions)
            if config.host_cache_dir
            else None
        )

    def run(self) -> None:
        """The thread's loop: wait for work, then fetch until nothing newer is wanted."""
        stop = self._shared.stop
        while not stop.is_set():
            self.work.wait()
            self.work.clear()
            try:
                while not stop.is_set() and self.fetch_once():
                    pass
            except Exception as exc:  # fetch_once handles the expected failures
                self._failed(self._shared.state.want, exc)

    def offer(self, newer: int) -> None:
        """LATEST names ``newer``, beyond what is held: fetch it next, abandoning the
        download in flight when that moves fewer bytes."""
        with self._shared.lock:
            current = self._shared.state.downloading
        if current is not None and current < newer and self._should_abandon(current, newer):
            self.cancel.set()
        self.work.set()

    def interrupt(self) -> None:
        """Abandon the download in flight and look again (another store, or stopping)."""
        self.cancel.set()
        self.work.set()

    def staged_path(self, version: int) -> Path | None:
        return None if self._cache is None else self._cache.path(version)

    def fetch_once(self) -> bool:
        """Download the newest wanted version if it is newer than what is held; True if done."""
        st = self._shared.state
        with self._shared.lock:
            want = st.wanted()
            have, lend = st.base(self._shared.config.reuse_installed)
            sub = st.sub
        if want is None or not self._visible(sub, want, have):
            return False
        self._begin(want, lend)
        held = "holding no version yet" if have is None else f"holding v{have.version}"
        log.info("downloading v%d (%s)", want, held)
        try:
            snap = self._fetch(sub, want, have, lend)
        except FetchCancelled:
            return not self._shared.stop.is_set()
        except Exception as exc:  # any failure: record it, back off, try again
            self._failed(want, exc)
            return False
        finally:
            with self._shared.lock:
                st.downloading = None
        self._done(snap)
        return True

    def _visible(self, sub: Subscriber, want: int, have: Snapshot | None) -> bool:
        """Whether ``want`` is whole in the store; if not, wait (backing off) to look again."""
        try:
            missing = sub.missing(want, None if have is None else have.version)
        except Exception as exc:  # recorded like a failed download
            self._failed(want, exc)
            return False
        if missing is not None:
            self._pause(self._visibility.not_whole(sub, want, missing))
            return False
        self._visibility.reset()
        with self._shared.lock:
            st = self._shared.state
            st.visible = max(want, st.visible if st.visible is not None else -1)
        return True

    def _begin(self, want: int, lend: bool) -> None:
        with self._shared.lock:
            self._shared.state.downloading = want
            self.progress.reset()
            self.cancel.clear()
            if lend:
                self._shared.state.lend_installed()

    def _fetch(self, sub: Subscriber, want: int, have: Snapshot | None, lend: bool) -> Snapshot:
        progress, cancel = self.progress.add, self.cancel
        if self._cache is not None:
            return self._cache.fetch(sub, want, have=have, cancel=cancel, progress=progress)
        alloc = reusing(have) if lend and have is not None else None
        return sub.fetch(want, have=have, alloc=alloc, cancel=cancel, progress=progress)

    def _done(self, snap: Snapshot) -> None:
        with self._shared.lock:
            self._shared.state.mark_ready(snap, self._shared.clock.time())
            self._shared.failures.clear("download")
            self._shared.lock.notify_all()
        self._streak.reset()
        self._shared.observer.downloaded(snap)
        source = describe_source(snap.path, snap.downloaded_bytes)
        log.info("v%d ready: %s, verified", snap.version, source)

    def _failed(self, want: int | None, exc: BaseException) -> None:
        """Record a failed download and wait (backing off) before the next try."""
        wait_s = self._streak.fail()
        self._shared.failures.record(
            "download",
            f"download of v{want} failed: {describe(exc)} (attempt {self._streak.count}; "
            f"next in {wait_s:.1f} s)",
            cause=exc,
        )
        self._pause(wait_s)

    def _pause(self, wait_s: float) -> None:
        self.work.wait(wait_s)  # a newer version, a switch or stop() ends it early
        self.work.set()  # then look again

    def _should_abandon(self, current: int, newer: int) -> bool:
        """Switch when going straight to ``newer`` moves fewer bytes than finishing first."""
        with self._shared.lock:
            have, sub = self._shared.state.held_version(), self._shared.state.sub
        try:
            left = sub.plan(current, have).download_bytes - self.progress.value
            then = sub.plan(newer, current).download_bytes
            straight = sub.plan(newer, have).download_bytes
        except WanrlError:
            return False
        return straight < left + then
