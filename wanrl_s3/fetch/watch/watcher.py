"""The Watcher: a poll thread and a download thread around one state, and ``install``."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...format.latest import Latest
from ...store import SYSTEM_CLOCK, Clock
from ..subscriber import Snapshot, Subscriber
from .config import WatchConfig
from .failures import Failure, FailureLog, run_guarded
from .observer import IGNORE, WatchObserver
from .poll import LatestPoller
from .prefetch import Prefetcher
from .result import InstallResult
from .state import Shared, WatchState
from .visibility import Visibility


class Watcher:
    """Background prefetch of the newest version; ``install()`` applies it.

    See :mod:`wanrl_s3.fetch.watch` for what it guarantees. It composes a
    :class:`~.poll.LatestPoller` (the poll thread), a :class:`~.prefetch.Prefetcher`
    (the download thread) and a :class:`~.failures.FailureLog` both write, around one
    :class:`~.state.WatchState` under one lock; this class starts and stops the
    threads and is what the caller sees. ``observer`` is told what happens as it
    happens (:class:`~.observer.WatchObserver`: the hooks of :class:`wanrl_s3.WorkerMetrics`).
    """

    def __init__(
        self,
        subscriber: Subscriber,
        config: WatchConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        start_from: Snapshot | None = None,
        rng: random.Random | None = None,
        observer: WatchObserver = IGNORE,
    ) -> None:
        self.config = config or WatchConfig()
        self.clock = clock
        self.observer = observer
        self._lock = threading.Condition()
        self._state = WatchState(subscriber, installed=start_from)
        self._stop = threading.Event()
        self._failures = FailureLog(clock, observer)
        rng = rng or random.Random()
        shared = Shared(
            self._state, self._lock, self.config, clock, rng, self._failures, self._stop, observer
        )
        self._visibility = Visibility(shared)
        self._prefetch = Prefetcher(shared, self._visibility)
        self._poller = LatestPoller(shared, self._visibility, self._prefetch)
        self._threads: list[threading.Thread] = []

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> Watcher:
        """Start the poll and download threads (telling the observer first); returns ``self``.

        A thread that dies is recorded (:attr:`failure`) and makes :meth:`check_alive` raise."""
        self.observer.started(self)
        for loop, name in ((self._poller.run, "wanrl-poll"), (self._prefetch.run, "wanrl-dl")):
            t = threading.Thread(
                target=run_guarded, args=(loop, name, self._failures), name=name, daemon=True
            )
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
            failure = self._failures.get("thread")
            raise RuntimeError(failure.message if failure else "a watcher thread ended")

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop both threads, interrupting a download in flight; waits ``timeout_s`` for each."""
        self._stop.set()
        self._prefetch.interrupt()
        for t in self._threads:
            t.join(timeout_s)

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- what the caller sees -------------------------------------------------------
    @property
    def sub(self) -> Subscriber:
        """The subscriber read from now (:meth:`switch` replaces it)."""
        return self._state.sub

    @property
    def installed_version(self) -> int | None:
        """The version installed last (the one given as ``start_from`` until then), or None."""
        installed = self._state.installed
        return None if installed is None else installed.version

    @property
    def latest_version(self) -> int | None:
        """The version LATEST named at the last poll that read it (None before one did)."""
        return self._state.want

    @property
    def ready_version(self) -> int | None:
        """The version downloaded and verified, waiting for :meth:`install`; None when none is."""
        ready = self._state.ready
        return None if ready is None else ready.snapshot.version

    @property
    def failure(self) -> Failure | None:
        """The newest current failure of the background work; None once it has recovered."""
        return self._failures.newest()

    @property
    def last_error(self) -> str | None:
        """The message of :attr:`failure`, for a status line; None once the work has recovered."""
        failure = self.failure
        return None if failure is None else failure.message

    @property
    def held_version(self) -> int | None:
        """The version installed, or ready to install if newer."""
        with self._lock:
            return self._state.held_version()

    @property
    def region_version(self) -> int | None:
        """The newest version this watcher's store has shown whole (held or found visible)."""
        with self._lock:
            found = [v for v in (self._state.held_version(), self._state.visible) if v is not None]
        return max(found, default=None)

    def staged_path(self, version: int) -> Path | None:
        """The file ``version`` is staged in (with ``host_cache_dir``), else None.

        Such a file is written once, verified, and never changed in place (a file
        that fails a later check is replaced whole), so a caller may hard-link it
        to install it; it is deleted once it leaves the ``keep_versions`` window.
        """
        return self._prefetch.staged_path(version)

    # -- steering -------------------------------------------------------------------
    def poll_once(self) -> Latest | None:
        """One conditional GET of LATEST (the poll thread's step); None when unchanged."""
        return self._poller.poll_once()

    def fetch_once(self) -> bool:
        """Download the newest wanted version if newer than what is held (the download
        thread's step); True if one became ready."""
        return self._prefetch.fetch_once()

    def switch(self, subscriber: Subscriber) -> None:
        """Read from another store from now on (a region fallback, or back home).

        Every region holds the same versions under the same keys, so the held
        version stays and the next download is still a delta from it. A
        download in flight from the old store is abandoned; the caller keeps
        the old subscriber open until the watcher stops.
        """
        with self._lock:
            self._state.sub = subscriber
            self._state.visible = None
            self._poller.forget_etag()
            self._visibility.reset()
        self._prefetch.interrupt()

    # -- installing -------------------------------------------------------------------
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
            ready = self._state.take_ready()
        if ready is None:
            return None
        started_s = self.clock.time()
        try:
            if sink is not None:
                sink(ready.snapshot)
            if apply is not None:
                for name, arr in ready.snapshot.items():
                    apply(name, arr)
        except BaseException:
            with self._lock:  # not installed: offer it again unless a newer one is ready
                self._state.put_back(ready)
            raise
        done_s = self.clock.time()
        with self._lock:
            self._state.mark_installed(ready.snapshot)
        result = InstallResult.of(ready, started_s, done_s)
        self.observer.installed(result)
        return result

    def done_with(self, snapshot: Snapshot) -> None:
        """The caller has copied ``snapshot`` (the version it installed) out and holds no
        reference to its arrays: with ``reuse_installed`` the next version may be decoded
        into them. Until then a download gets new arrays (two snapshots for a while), so a
        caller that never says so is only slower, never handed changing tensors."""
        with self._lock:
            if snapshot is self._state.installed:
                self._state.installed_done = True
