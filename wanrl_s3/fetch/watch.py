"""Keeping a worker current: poll, prefetch in the background, install with a short pause.

A :class:`Watcher` polls LATEST with a conditional GET (``If-None-Match`` on its
ETag, so a poll with nothing new moves no data), at an interval with jitter so
a thousand workers do not poll in step. A new version is downloaded, verified
and decoded into host memory by a background thread while the caller's engine
keeps generating (invariant 7); :meth:`Watcher.install` then hands the newest
ready version to the engine, and that local apply is the only pause. A version
superseded while it downloads is abandoned for the newer one when finishing it
and then taking the delta would move more bytes than going straight there.

Before downloading, the watcher checks that the version is whole in its store
(:meth:`Subscriber.missing`). In a replica region, bucket replication can show
LATEST before the manifest, or a manifest before its payload; such a version
is not yet visible, which is not an error: the watcher logs it, waits with
exponential backoff and checks again. :meth:`Watcher.switch` moves a watcher
to another region's store (a fallback), keeping the version it holds.

With ``WatchConfig.share_dir``, the watchers of one host download each version
once between them (:mod:`wanrl_s3.fetch.node_share`) and map one shared copy.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import FetchCancelled, NotFoundError, UsageError, WanrlError
from ..format.latest import Latest
from ..store import SYSTEM_CLOCK, Clock
from ..units import require_positive
from .node_share import NodeShare
from .subscriber import Snapshot, Subscriber

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchConfig:
    poll_interval_s: float = 10.0
    jitter_fraction: float = 0.2  # each wait is interval * (1 +- jitter)
    retry_backoff_s: float = 5.0  # wait after a failed download before trying again
    # first wait for a version not yet visible (replicating); doubles up to poll_interval_s
    visible_backoff_s: float = 0.5
    # a directory (on a tmpfs: /dev/shm/...) that the watchers of one host share: each
    # version is downloaded once per host and mapped by all (wanrl_s3.fetch.node_share)
    share_dir: str | None = None

    def __post_init__(self) -> None:
        require_positive("poll_interval_s", self.poll_interval_s)
        if not 0 <= self.jitter_fraction < 1:
            raise UsageError(f"jitter_fraction must be in [0, 1), got {self.jitter_fraction}")
        require_positive("visible_backoff_s", self.visible_backoff_s)

    def next_wait_s(self, rng: random.Random) -> float:
        return self._jittered(self.poll_interval_s, rng)

    def visible_wait_s(self, attempt: int, rng: random.Random) -> float:
        """The wait before visibility check ``attempt`` + 1: exponential, capped, jittered."""
        cap_s = max(self.poll_interval_s, self.visible_backoff_s)
        return self._jittered(min(cap_s, self.visible_backoff_s * 2 ** (attempt - 1)), rng)

    def _jittered(self, wait_s: float, rng: random.Random) -> float:
        return wait_s * (1 + rng.uniform(-self.jitter_fraction, self.jitter_fraction))


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
        return {
            "version": self.version,
            "tensors": self.tensors,
            "path": list(self.path),
            "downloaded_bytes": self.downloaded_bytes,
            "published_at_s": self.published_at_s,
            "seen_at_s": self.seen_at_s,
            "ready_at_s": self.ready_at_s,
            "installed_at_s": self.installed_at_s,
            "download_s": self.download_s,
            "verify_s": self.verify_s,
            "apply_s": self.apply_s,
        }


@dataclass
class _Ready:
    snapshot: Snapshot
    seen_at_s: float
    ready_at_s: float


@dataclass
class _State:
    want: int | None = None  # newest version seen in LATEST
    visible: int | None = None  # newest version found whole in the store
    downloading: int | None = None
    progress_bytes: int = 0
    ready: _Ready | None = None
    installing: Snapshot | None = None  # taken from ready, being applied by install()
    installed: Snapshot | None = None
    seen_at_s: dict[int, float] = field(default_factory=dict)
    last_error: str | None = None


class Watcher:
    """Background prefetch of the newest version; ``install()`` applies it."""

    def __init__(
        self,
        subscriber: Subscriber,
        config: WatchConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        start_from: Snapshot | None = None,
        rng: random.Random | None = None,
    ) -> None:
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
        self._invisible_checks = 0  # consecutive "not yet visible" answers, for the backoff
        self._threads: list[threading.Thread] = []
        self._share = NodeShare(self.config.share_dir) if self.config.share_dir else None

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

    @property
    def held_version(self) -> int | None:
        """The version installed, or ready to install if newer."""
        with self._lock:
            return self._held_version()

    @property
    def region_version(self) -> int | None:
        """The newest version this watcher's store has shown whole (held or found visible)."""
        with self._lock:
            found = [v for v in (self._held_version(), self._state.visible) if v is not None]
        return max(found, default=None)

    def switch(self, subscriber: Subscriber) -> None:
        """Read from another store from now on (a region fallback, or back home).

        Every region holds the same versions under the same keys, so the held
        version stays and the next download is still a delta from it. A
        download in flight from the old store is abandoned; the caller keeps
        the old subscriber open until the watcher stops.
        """
        with self._lock:
            self.sub = subscriber
            self._etag = None
            self._state.visible = None
            self._invisible_checks = 0
        self._cancel.set()
        self._work.set()

    def wait_ready(self, timeout_s: float | None = None) -> int | None:
        """Block until a version newer than the installed one is ready (or time out)."""
        with self._lock:
            self._lock.wait_for(
                lambda: self._state.ready is not None or self._stop.is_set(), timeout_s
            )
            return self.ready_version

    def install(
        self,
        apply: Callable[[str, np.ndarray], None] | None = None,
        *,
        sink: Callable[[Snapshot], None] | None = None,
    ) -> InstallResult | None:
        """Apply the newest ready version; None at once if nothing new is ready.

        ``apply`` receives each (name, array) of the verified version; ``sink``
        receives the whole snapshot instead (e.g. to write a file).
        """
        with self._lock:
            ready, self._state.ready = self._state.ready, None
            if ready is None:
                return None
            snap = self._state.installing = ready.snapshot  # still held while it is applied
        start = self.clock.time()
        try:
            if sink is not None:
                sink(snap)
            if apply is not None:
                for name, arr in snap.items():
                    apply(name, arr)
        except BaseException:
            with self._lock:  # not installed: offer it again unless a newer one is ready
                self._state.installing = None
                self._state.ready = self._state.ready or ready
            raise
        done = self.clock.time()
        with self._lock:
            self._state.installed, self._state.installing = snap, None
        published = snap.manifest.created_at_s if snap.manifest else ready.seen_at_s
        return InstallResult(
            snap.version,
            len(snap.tensors),
            snap.path,
            snap.downloaded_bytes,
            published,
            ready.seen_at_s,
            ready.ready_at_s,
            done,
            snap.download_s,
            snap.verify_s,
            done - start,
        )

    # -- polling --------------------------------------------------------------------
    def poll_once(self) -> Latest | None:
        """One conditional GET of LATEST; a newer version wakes the downloader."""
        with self._lock:
            sub, etag = self.sub, self._etag
        polled = sub.poll_latest(etag)
        if polled is None:
            return None
        latest = polled[0]
        with self._lock:
            if self.sub is not sub:  # switched stores meanwhile: that answer is stale
                return None
            self._etag = polled[1]
            st = self._state
            newest = max((v for v in (st.want, self._held_version()) if v is not None), default=-1)
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

    def _held(self) -> Snapshot | None:
        """The newest version this watcher has: ready, being installed, or installed."""
        st = self._state
        return st.ready.snapshot if st.ready is not None else st.installing or st.installed

    def _held_version(self) -> int | None:
        held = self._held()
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
            have = self._held()
            want = st.want
            if want is None or (have is not None and have.version >= want):
                return False
            sub = self.sub
        if not self._visible(sub, want, have):
            return False
        with self._lock:
            self._state.downloading, self._state.progress_bytes = want, 0
            self._cancel.clear()
        log.info("downloading v%d (holding v%s)", want, None if have is None else have.version)
        try:
            snap = self._fetch(sub, want, have)
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
            seen_at = self._state.seen_at_s
            seen = seen_at.pop(want, self.clock.time())
            for skipped in [v for v in seen_at if v < want]:  # superseded: never installed
                del seen_at[skipped]
            self._state.ready = _Ready(snap, seen, self.clock.time())
            self._state.last_error = None
            self._lock.notify_all()
        log.info(
            "version %d ready: %d bytes via %s", snap.version, snap.downloaded_bytes, snap.path
        )
        return True

    def _fetch(self, sub: Subscriber, want: int, have: Snapshot | None) -> Snapshot:
        if self._share is None:
            return sub.fetch(want, have=have, cancel=self._cancel, progress=self._count)
        return self._share.fetch(sub, want, have=have, cancel=self._cancel, progress=self._count)

    def _visible(self, sub: Subscriber, want: int, have: Snapshot | None) -> bool:
        """Whether ``want`` is whole in the store; if not, log it, back off, and retry later."""
        try:
            missing = sub.missing(want, None if have is None else have.version)
        except WanrlError as exc:
            self._record_error(f"visibility check of v{want}: {exc}")
            wait_s = self.config.retry_backoff_s
        else:
            if missing is None:
                with self._lock:
                    self._invisible_checks = 0
                    self._state.visible = max(want, self._state.visible or -1)
                return True
            self._invisible_checks += 1
            wait_s = self.config.visible_wait_s(self._invisible_checks, self._rng)
            log.info(
                "v%d is not yet visible at %s (missing %s): still replicating, not an "
                "error; checking again in %.1f s",
                want,
                sub.store.url,
                missing,
                wait_s,
            )
        self._work.wait(wait_s)  # a newer version or stop() ends the wait early
        self._work.set()
        return False

    def _count(self, n: int) -> None:
        self._state.progress_bytes += n

    def _record_error(self, message: str) -> None:
        log.warning("%s", message)
        with self._lock:
            self._state.last_error = message


def wait_visible(
    sub: Subscriber,
    version: int,
    have_version: int | None = None,
    *,
    timeout_s: float,
    config: WatchConfig | None = None,
    clock: Clock = SYSTEM_CLOCK,
    rng: random.Random | None = None,
) -> None:
    """Block until ``version`` is whole in ``sub``'s store, backing off between checks.

    For one-shot readers (``pull``) of a replica: a version replication has
    only partly copied is waited for, not read. NotFoundError after ``timeout_s``.
    """
    config, rng = config or WatchConfig(), rng or random.Random()
    deadline_s = clock.monotonic() + timeout_s
    attempt = 0
    while (missing := sub.missing(version, have_version)) is not None:
        remaining_s = deadline_s - clock.monotonic()
        if remaining_s <= 0:
            raise NotFoundError(
                f"v{version} is still not whole at {sub.store.url} after "
                f"{timeout_s:g} s (missing {missing}): replication may have "
                "stalled; try another --region"
            )
        attempt += 1
        wait_s = min(remaining_s, config.visible_wait_s(attempt, rng))
        log.info(
            "v%d is not yet visible at %s (missing %s): still replicating; checking "
            "again in %.1f s",
            version,
            sub.store.url,
            missing,
            wait_s,
        )
        clock.sleep(wait_s)
