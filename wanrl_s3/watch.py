"""Keeping a worker current: poll, prefetch in the background, install with a short pause.

A :class:`Watcher` polls LATEST with a conditional GET (``If-None-Match`` on its
ETag, so a poll with nothing new moves no data), at an interval with jitter so
a thousand workers do not poll in step. A new version is downloaded, verified
and decoded into host memory by a background thread while the caller's engine
keeps generating (invariant 7); :meth:`Watcher.install` then hands the newest
ready version to the engine, and that local apply is the only pause. A version
superseded while it downloads is abandoned for the newer one when finishing it
and then taking the delta would move more bytes than going straight there.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .errors import UsageError, WanrlError
from .manifest import Latest
from .store import SYSTEM_CLOCK, Clock
from .subscriber import FetchCancelled, Snapshot, Subscriber

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchConfig:
    poll_interval_s: float = 10.0
    jitter_fraction: float = 0.2  # each wait is interval * (1 +- jitter)
    retry_backoff_s: float = 5.0  # wait after a failed download before trying again

    def __post_init__(self) -> None:
        if self.poll_interval_s <= 0:
            raise UsageError(f"poll_interval_s must be > 0, got {self.poll_interval_s}")
        if not 0 <= self.jitter_fraction < 1:
            raise UsageError(f"jitter_fraction must be in [0, 1), got {self.jitter_fraction}")

    def next_wait_s(self, rng: random.Random) -> float:
        return self.poll_interval_s * (1 + rng.uniform(-self.jitter_fraction,
                                                       self.jitter_fraction))


@dataclass(frozen=True)
class InstallResult:
    """What one install did, with the times that make up dissemination as this worker saw it."""

    version: int
    tensors: int
    path: tuple[int, ...]  # versions whose payload was downloaded
    downloaded_bytes: int
    published_at_s: float  # the manifest's commit time (the publisher's clock)
    seen_at_s: float  # when this worker first saw the version in LATEST
    ready_at_s: float  # downloaded, verified, decoded in host memory
    installed_at_s: float
    download_s: float
    verify_s: float
    apply_s: float

    @property
    def total_s(self) -> float:
        return self.installed_at_s - self.published_at_s

    def to_dict(self) -> dict[str, float | int | list[int]]:
        return {"version": self.version, "tensors": self.tensors, "path": list(self.path),
                "downloaded_bytes": self.downloaded_bytes,
                "published_at_s": self.published_at_s, "seen_at_s": self.seen_at_s,
                "ready_at_s": self.ready_at_s, "installed_at_s": self.installed_at_s,
                "download_s": self.download_s, "verify_s": self.verify_s,
                "apply_s": self.apply_s}


@dataclass
class _Ready:
    snapshot: Snapshot
    seen_at_s: float
    ready_at_s: float


@dataclass
class _State:
    want: int | None = None  # newest version seen in LATEST
    downloading: int | None = None
    progress_bytes: int = 0
    ready: _Ready | None = None
    installed: Snapshot | None = None
    seen_at_s: dict[int, float] = field(default_factory=dict)
    last_error: str | None = None


class Watcher:
    """Background prefetch of the newest version; ``install()`` applies it."""

    def __init__(self, subscriber: Subscriber, config: WatchConfig | None = None, *,
                 clock: Clock = SYSTEM_CLOCK, start_from: Snapshot | None = None,
                 rng: random.Random | None = None) -> None:
        self.sub = subscriber
        self.config = config or WatchConfig()
        self.clock = clock
        self._rng = rng or random.Random()
        self._state = _State(installed=start_from)
        self._lock = threading.Condition()
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._work = threading.Event()
        self._etag: str | None = None
        self._threads: list[threading.Thread] = []

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> Watcher:
        for target, name in ((self._poll_loop, "wanrl-poll"), (self._download_loop, "wanrl-dl")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._cancel.set()
        self._work.set()
        for t in self._threads:
            t.join(timeout_s)

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- what the caller sees -------------------------------------------------------
    @property
    def installed_version(self) -> int | None:
        installed = self._state.installed
        return None if installed is None else installed.version

    @property
    def ready_version(self) -> int | None:
        ready = self._state.ready
        return None if ready is None else ready.snapshot.version

    @property
    def last_error(self) -> str | None:
        return self._state.last_error

    def wait_ready(self, timeout_s: float | None = None) -> int | None:
        """Block until a version newer than the installed one is ready (or time out)."""
        with self._lock:
            self._lock.wait_for(lambda: self._state.ready is not None or self._stop.is_set(),
                                timeout_s)
            return self.ready_version

    def install(self, apply: Callable[[str, np.ndarray], None] | None = None, *,
                sink: Callable[[Snapshot], None] | None = None) -> InstallResult | None:
        """Apply the newest ready version; None at once if nothing new is ready.

        ``apply`` receives each (name, array) of the verified version; ``sink``
        receives the whole snapshot instead (e.g. to write a file).
        """
        with self._lock:
            ready, self._state.ready = self._state.ready, None
        if ready is None:
            return None
        snap = ready.snapshot
        start = self.clock.time()
        if sink is not None:
            sink(snap)
        if apply is not None:
            for name, arr in snap.items():
                apply(name, arr)
        done = self.clock.time()
        with self._lock:
            self._state.installed = snap
        published = snap.manifest.created_at_s if snap.manifest else ready.seen_at_s
        return InstallResult(snap.version, len(snap.tensors), snap.path, snap.downloaded_bytes,
                             published, ready.seen_at_s, ready.ready_at_s, done,
                             snap.download_s, snap.verify_s, done - start)

    # -- polling --------------------------------------------------------------------
    def poll_once(self) -> Latest | None:
        """One conditional GET of LATEST; a newer version wakes the downloader."""
        polled = self.sub.poll_latest(self._etag)
        if polled is None:
            return None
        latest, self._etag = polled
        with self._lock:
            st = self._state
            newest = max((v for v in (st.want, self._held_version()) if v is not None),
                         default=-1)
            if latest.version <= newest:
                return latest
            st.want = latest.version
            st.seen_at_s.setdefault(latest.version, self.clock.time())
            downloading = st.downloading
        if downloading is not None and self._should_abandon(downloading, latest.version):
            self._cancel.set()
        self._work.set()
        return latest

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except WanrlError as exc:
                self._record_error(f"poll: {exc}")
            self._stop.wait(self.config.next_wait_s(self._rng))

    def _held_version(self) -> int | None:
        st = self._state
        held = st.ready.snapshot if st.ready is not None else st.installed
        return None if held is None else held.version

    def _should_abandon(self, current: int, newer: int) -> bool:
        """Switch when going straight to ``newer`` moves fewer bytes than finishing first."""
        try:
            have = self._held_version()
            left = self.sub.plan(current, have).download_bytes - self._state.progress_bytes
            then = self.sub.plan(newer, current).download_bytes
            straight = self.sub.plan(newer, have).download_bytes
        except WanrlError:
            return False
        return straight < left + then

    # -- downloading ------------------------------------------------------------------
    def _download_loop(self) -> None:
        while not self._stop.is_set():
            self._work.wait()
            self._work.clear()
            while not self._stop.is_set() and self.fetch_once():
                pass

    def fetch_once(self) -> bool:
        """Download the newest wanted version if it is newer than what is held; True if done."""
        with self._lock:
            st = self._state
            have = st.ready.snapshot if st.ready is not None else st.installed
            want = st.want
            if want is None or (have is not None and have.version >= want):
                return False
            st.downloading, st.progress_bytes = want, 0
            self._cancel.clear()
        log.info("downloading v%d (holding v%s)", want, None if have is None else have.version)
        try:
            snap = self.sub.fetch(want, have=have, cancel=self._cancel, progress=self._count)
        except FetchCancelled:
            return not self._stop.is_set()
        except WanrlError as exc:
            self._record_error(f"download of v{want}: {exc}")
            self._stop.wait(self.config.retry_backoff_s)
            self._work.set()  # try again
            return False
        finally:
            with self._lock:
                self._state.downloading = None
        with self._lock:
            seen = self._state.seen_at_s.pop(want, self.clock.time())
            self._state.ready = _Ready(snap, seen, self.clock.time())
            self._state.last_error = None
            self._lock.notify_all()
        log.info("version %d ready: %d bytes via %s", snap.version, snap.downloaded_bytes,
                 snap.path)
        return True

    def _count(self, n: int) -> None:
        self._state.progress_bytes += n

    def _record_error(self, message: str) -> None:
        log.warning("%s", message)
        with self._lock:
            self._state.last_error = message
