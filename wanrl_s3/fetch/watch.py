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
exponential backoff and checks again. A version that stays invisible past
``invisible_grace_s`` is reported as an error (a pointer to a version that
does not exist, or replication that stalled), and a LATEST that changes again
is followed at once: one pointer the watcher could not follow never blocks the
next. :meth:`Watcher.switch` moves a watcher to another region's store (a
fallback), keeping the version it holds.

Neither background thread may die unseen: each catches every exception at its
top, logs it in one line, records it as :attr:`Watcher.failure` (the worker
writes it into its status object) and tries again with exponential backoff.
Only an exception that is not an ``Exception`` (``SystemExit`` raised in a
thread, say) ends a thread; :attr:`Watcher.alive` then turns false and
:meth:`Watcher.check_alive` raises, so that the process can exit.

With ``WatchConfig.share_dir``, the watchers of one host download each version
once between them (:mod:`wanrl_s3.fetch.node_share`) and map one shared copy.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import FetchCancelled, NotFoundError, UsageError, WanrlError
from ..format.latest import Latest
from ..store import SYSTEM_CLOCK, Clock
from ..units import MiB, require_int, require_positive
from .node_share import NodeShare
from .subscriber import Snapshot, Subscriber, reusing

log = logging.getLogger(__name__)
_MAX_DOUBLINGS = 40  # 2**40 times any first wait is past every cap: no float overflow


@dataclass(frozen=True)
class WatchConfig:
    poll_interval_s: float = 10.0
    jitter_fraction: float = 0.2  # each wait is interval * (1 +- jitter)
    retry_backoff_s: float = 5.0  # first wait after a failed download; doubles on each failure
    # first wait for a version not yet visible (replicating); doubles up to poll_interval_s
    visible_backoff_s: float = 0.5
    # the longest wait after repeated failures (polls and downloads back off up to it)
    max_backoff_s: float = 60.0
    # a version LATEST names that is still not whole after this long is reported as an error
    # (a pointer to a version that does not exist, or stalled replication); still checked
    invisible_grace_s: float = 300.0
    # a directory (on a tmpfs: /dev/shm/...) that the watchers of one host share: each
    # version is downloaded once per host and mapped by all (wanrl_s3.fetch.node_share)
    share_dir: str | None = None
    # with share_dir: how many of the newest versions' files it keeps (each one a snapshot
    # on disk); 1 for a directory only this watcher uses (nothing to share, only to stage)
    keep_versions: int = 3
    # in memory (no share_dir): decode the next version into the installed version's own
    # arrays once the caller says it is done with them (Watcher.done_with), so host memory
    # holds one snapshot (and the payload window), not two. For a caller that copies the
    # tensors out (an inference engine) and keeps no reference to them. A download that
    # fails midway spoils them; the next one starts from the keyframe.
    reuse_installed: bool = False

    def __post_init__(self) -> None:
        require_positive("poll_interval_s", self.poll_interval_s)
        if not 0 <= self.jitter_fraction < 1:
            raise UsageError(f"jitter_fraction must be in [0, 1), got {self.jitter_fraction}")
        for name in ("retry_backoff_s", "visible_backoff_s", "max_backoff_s", "invisible_grace_s"):
            require_positive(name, getattr(self, name))
        require_int("keep_versions", self.keep_versions)
        if self.reuse_installed and self.share_dir:
            raise UsageError(
                "reuse_installed is for versions held in memory; with share_dir they are "
                "files, which hold no second copy in memory anyway"
            )

    def next_wait_s(self, rng: random.Random) -> float:
        return self._jittered(self.poll_interval_s, rng)

    def visible_wait_s(self, attempt: int, rng: random.Random) -> float:
        """The wait before visibility check ``attempt`` + 1: exponential, capped, jittered."""
        cap_s = max(self.poll_interval_s, self.visible_backoff_s)
        return self._jittered(_doubled(self.visible_backoff_s, attempt, cap_s), rng)

    def failure_wait_s(self, first_s: float, failures: int, rng: random.Random) -> float:
        """The wait after ``failures`` failures in a row: ``first_s`` doubling up to the cap."""
        cap_s = max(self.max_backoff_s, first_s)
        return self._jittered(_doubled(first_s, failures, cap_s), rng)

    def _jittered(self, wait_s: float, rng: random.Random) -> float:
        return wait_s * (1 + rng.uniform(-self.jitter_fraction, self.jitter_fraction))


def _doubled(first_s: float, attempt: int, cap_s: float) -> float:
    return min(cap_s, first_s * 2 ** min(max(attempt - 1, 0), _MAX_DOUBLINGS))


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


def describe_source(path: tuple[int, ...], downloaded_bytes: int) -> str:
    """Where a ready version's bytes came from, for a person reading the log."""
    if not path:
        return "nothing downloaded (a verified copy already on this host)"
    versions = ", ".join(f"v{v}" for v in path)
    payload = "the payload" if len(path) == 1 else "the payloads"
    return f"downloaded {downloaded_bytes / MiB:,.1f} MiB ({payload} of {versions})"


@dataclass(frozen=True, kw_only=True)
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

    @property
    def source(self) -> str:
        """Where its bytes came from, in words (see :func:`describe_source`)."""
        return describe_source(self.path, self.downloaded_bytes)

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
    # the installed arrays were lent to a download (reuse_installed): no base any more
    installed_spoiled: bool = False
    # the caller is done with the installed arrays (done_with): they may be lent
    installed_done: bool = False
    seen_at_s: dict[int, float] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)  # by Failure.what; current only


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
        self._invisible_since: tuple[int, float] | None = None  # (version, monotonic start)
        self._download_failures = 0  # in a row, for the backoff
        self._threads: list[threading.Thread] = []
        self._share = (
            NodeShare(self.config.share_dir, keep_versions=self.config.keep_versions)
            if self.config.share_dir
            else None
        )

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> Watcher:
        for loop, name in ((self._poll_loop, "wanrl-poll"), (self._download_loop, "wanrl-dl")):
            t = threading.Thread(target=self._guarded, args=(loop, name), name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    @property
    def alive(self) -> bool:
        """False once a background thread has ended while the watcher was not stopping."""
        return self._stop.is_set() or all(t.is_alive() for t in self._threads)

    def check_alive(self) -> None:
        """Raise if a background thread has died (the process should exit: nothing installs)."""
        if not self.alive:
            failure = self._state.failures.get("thread")
            raise RuntimeError(failure.message if failure else "a watcher thread ended")

    def _guarded(self, loop: Callable[[], None], name: str) -> None:
        """Run a thread's loop; an exception that ends it is recorded, never silent.

        The loops catch every ``Exception`` themselves and go on; what reaches
        here (``SystemExit``, ``KeyboardInterrupt`` raised in the thread) ends
        the thread, and :meth:`check_alive` reports it.
        """
        try:
            loop()
        except BaseException as exc:
            self._record("thread", f"the {name} thread stopped: {_describe(exc)}", fatal=True)
            raise

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
    def failure(self) -> Failure | None:
        """The newest current failure of the background work; None once it has recovered."""
        with self._lock:
            return max(self._state.failures.values(), key=lambda f: f.at_s, default=None)

    @property
    def last_error(self) -> str | None:
        failure = self.failure
        return None if failure is None else failure.message

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

    def staged_path(self, version: int) -> Path | None:
        """The file ``version`` is staged in (with ``share_dir``), else None.

        Such a file is written once, verified, and never changed in place (a file
        that fails a later check is replaced whole), so a caller may hard-link it
        to install it; it is deleted once it leaves the ``keep_versions`` window.
        """
        return None if self._share is None else self._share.path(version)

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
            self._invisible_checks, self._invisible_since = 0, None
            self._state.failures.pop("visibility", None)
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
            self._state.installed_spoiled = self._state.installed_done = False
        published = snap.manifest.created_at_s if snap.manifest else ready.seen_at_s
        return InstallResult(
            version=snap.version,
            tensors=len(snap.tensors),
            path=snap.path,
            downloaded_bytes=snap.downloaded_bytes,
            published_at_s=published,
            seen_at_s=ready.seen_at_s,
            ready_at_s=ready.ready_at_s,
            installed_at_s=done,
            download_s=snap.download_s,
            verify_s=snap.verify_s,
            apply_s=done - start,
        )

    def done_with(self, snapshot: Snapshot) -> None:
        """The caller has copied ``snapshot`` (the version it installed) out and holds no
        reference to its arrays: with ``reuse_installed`` the next version may be decoded
        into them. Until then a download gets new arrays (two snapshots for a while), so a
        caller that never says so is only slower, never handed changing tensors."""
        with self._lock:
            if snapshot is self._state.installed:
                self._state.installed_done = True

    # -- polling --------------------------------------------------------------------
    def poll_once(self) -> Latest | None:
        """One conditional GET of LATEST; a newer version wakes the downloader.

        The version wanted is the one LATEST names now, not the highest it ever
        named: a pointer to a version that never appears is dropped as soon as
        LATEST changes again (the subscriber still refuses a rollback below a
        version it has followed).
        """
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
            if latest.version != st.want:
                self._follow(latest.version)
            held = self._held_version()
            if held is not None and latest.version <= held:
                return latest
            st.seen_at_s.setdefault(latest.version, self.clock.time())
            downloading = st.downloading
        if (
            downloading is not None
            and downloading < latest.version
            and self._should_abandon(downloading, latest.version)
        ):
            self._cancel.set()
        self._work.set()
        return latest

    def _follow(self, version: int) -> None:
        """LATEST now names ``version``: forget what an earlier pointer asked for (lock held)."""
        st = self._state
        st.want = version
        for named in [v for v in st.seen_at_s if v > version]:  # no longer named by LATEST
            del st.seen_at_s[named]
        self._invisible_since = None
        st.failures.pop("visibility", None)

    def _poll_loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:  # a poll thread that dies freezes the worker unseen
                failures += 1
                self._record("poll", f"reading LATEST failed: {_describe(exc)}")
                wait_s = self.config.failure_wait_s(
                    self.config.poll_interval_s, failures, self._rng
                )
            else:
                if failures:
                    log.info("reading LATEST works again after %d failed attempts", failures)
                failures = 0
                self._clear("poll")
                wait_s = self.config.next_wait_s(self._rng)
            self._stop.wait(wait_s)

    def _held(self) -> Snapshot | None:
        """The newest version this watcher has: ready, being installed, or installed."""
        st = self._state
        return st.ready.snapshot if st.ready is not None else st.installing or st.installed

    def _held_version(self) -> int | None:
        held = self._held()
        return None if held is None else held.version

    def _base(self) -> tuple[Snapshot | None, bool]:
        """The snapshot the next download starts from, and whether it may be decoded into
        (reuse_installed: the installed one, when nothing newer is ready or installing)."""
        st = self._state
        held = self._held()
        if held is None or (held is st.installed and st.installed_spoiled):
            return None, False
        return held, self.config.reuse_installed and held is st.installed and st.installed_done

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
            try:
                while not self._stop.is_set() and self.fetch_once():
                    pass
            except Exception as exc:  # fetch_once handles the expected failures
                self._download_failed(self._state.want, exc)

    def fetch_once(self) -> bool:
        """Download the newest wanted version if it is newer than what is held; True if done."""
        with self._lock:
            st = self._state
            have, lend = self._base()
            want = st.want
            held = self._held_version()
            if want is None or (held is not None and held >= want):
                return False
            sub = self.sub
        if not self._visible(sub, want, have):
            return False
        with self._lock:
            self._state.downloading, self._state.progress_bytes = want, 0
            self._cancel.clear()
            if lend:  # from the first write on, the installed arrays are no base: the
                # download owns them (they end as its output, or garbage if it fails)
                st.installed = replace(have, tensors={}) if have is not None else None
                st.installed_spoiled = True
        log.info(
            "downloading v%d (%s)",
            want,
            "holding no version yet" if have is None else f"holding v{have.version}",
        )
        try:
            snap = self._fetch(sub, want, have, lend)
        except FetchCancelled:
            return not self._stop.is_set()
        except Exception as exc:  # any failure: record it, back off, try again
            self._download_failed(want, exc)
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
            self._state.failures.pop("download", None)
            self._download_failures = 0
            self._lock.notify_all()
        log.info(
            "v%d ready: %s, verified",
            snap.version,
            describe_source(snap.path, snap.downloaded_bytes),
        )
        return True

    def _download_failed(self, want: int | None, exc: BaseException) -> None:
        """Record a failed download and wait (backing off) before the next try.

        A newer version, a switch or stop() ends the wait early.
        """
        self._download_failures += 1
        wait_s = self.config.failure_wait_s(
            self.config.retry_backoff_s, self._download_failures, self._rng
        )
        self._record(
            "download",
            f"download of v{want} failed: {_describe(exc)} (attempt {self._download_failures}; "
            f"next in {wait_s:.1f} s)",
            cause=exc,
        )
        self._work.wait(wait_s)
        self._work.set()  # try again

    def _fetch(self, sub: Subscriber, want: int, have: Snapshot | None, lend: bool) -> Snapshot:
        if self._share is None:
            alloc = reusing(have) if lend and have is not None else None
            return sub.fetch(
                want, have=have, alloc=alloc, cancel=self._cancel, progress=self._count
            )
        return self._share.fetch(sub, want, have=have, cancel=self._cancel, progress=self._count)

    def _visible(self, sub: Subscriber, want: int, have: Snapshot | None) -> bool:
        """Whether ``want`` is whole in the store; if not, log it, back off, and retry later."""
        try:
            missing = sub.missing(want, None if have is None else have.version)
        except Exception as exc:  # recorded like a failed download
            self._download_failed(want, exc)
            return False
        if missing is None:
            with self._lock:
                self._invisible_checks, self._invisible_since = 0, None
                self._state.visible = max(want, self._state.visible or -1)
                self._state.failures.pop("visibility", None)
            return True
        self._invisible_checks += 1
        wait_s = self.config.visible_wait_s(self._invisible_checks, self._rng)
        waited_s = self._invisible_for_s(want)
        if waited_s <= self.config.invisible_grace_s:
            log.info(
                "v%d is not yet visible at %s (missing %s): still replicating, not an "
                "error; checking again in %.1f s",
                want,
                sub.store.url,
                missing,
                wait_s,
            )
        else:
            self._record(
                "visibility",
                f"LATEST names v{want}, which is still not whole at {sub.store.url} after "
                f"{waited_s:.0f} s, past the {self.config.invisible_grace_s:g} s grace "
                f"(missing {missing}): a pointer to a version that does not exist, or stalled "
                "replication; still checking, and following LATEST when it changes",
                log_it="visibility" not in self._state.failures,  # once per pointer, not per check
            )
        self._work.wait(wait_s)  # a newer version or stop() ends the wait early
        self._work.set()
        return False

    def _invisible_for_s(self, version: int) -> float:
        """How long ``version`` has been named by LATEST and found not whole."""
        now_s = self.clock.monotonic()
        with self._lock:
            if self._invisible_since is None or self._invisible_since[0] != version:
                self._invisible_since = (version, now_s)
            return now_s - self._invisible_since[1]

    def _count(self, n: int) -> None:
        with self._lock:  # called from every thread of the download pool at once
            self._state.progress_bytes += n

    def _record(
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
        with self._lock:
            self._state.failures[what] = Failure(what, message, self.clock.time(), cause)

    def _clear(self, what: str) -> None:
        with self._lock:
            self._state.failures.pop(what, None)


def _describe(exc: BaseException) -> str:
    """One line for a failure: our errors speak for themselves; anything else is named."""
    if isinstance(exc, WanrlError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {exc}"


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
