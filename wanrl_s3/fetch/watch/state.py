"""What a watcher holds and wants, and what its parts share.

One :class:`WatchState` per watcher, read and written under the watcher's lock
by the poll thread, the download thread and the caller's ``install``: a
version moves from wanted to downloading, ready, installing and installed, and
a newer LATEST can overtake it at any point. Its methods only read and move
that state (the caller holds the lock); the I/O is in the parts that use it.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field, replace

from ...store import Clock
from ..subscriber import Snapshot, Subscriber
from .config import WatchConfig
from .failures import FailureLog
from .observer import IGNORE, WatchObserver


@dataclass
class Ready:
    """A version downloaded, verified and decoded, waiting for ``install``."""

    snapshot: Snapshot
    seen_at_s: float
    ready_at_s: float


@dataclass
class WatchState:
    sub: Subscriber  # the store read from now; switch() replaces it
    want: int | None = None  # the version LATEST names now
    visible: int | None = None  # newest version found whole in the store
    downloading: int | None = None
    ready: Ready | None = None
    installing: Snapshot | None = None  # taken from ready, being applied by install()
    installed: Snapshot | None = None
    # the installed arrays were lent to a download (reuse_installed): no base any more
    installed_spoiled: bool = False
    # the caller is done with the installed arrays (done_with): they may be lent
    installed_done: bool = False
    seen_at_s: dict[int, float] = field(default_factory=dict)  # when LATEST first named each

    def held(self) -> Snapshot | None:
        """The newest version this watcher has: ready, being installed, or installed."""
        return self.ready.snapshot if self.ready is not None else self.installing or self.installed

    def held_version(self) -> int | None:
        held = self.held()
        return None if held is None else held.version

    def wanted(self) -> int | None:
        """The version to download next: the one LATEST names, if newer than what is held."""
        held = self.held_version()
        return None if self.want is None or (held is not None and held >= self.want) else self.want

    def base(self, reuse_installed: bool) -> tuple[Snapshot | None, bool]:
        """The snapshot the next download starts from, and whether it may be decoded into
        (reuse_installed: the installed one, when nothing newer is ready or installing)."""
        held = self.held()
        if held is None or (held is self.installed and self.installed_spoiled):
            return None, False
        return held, reuse_installed and held is self.installed and self.installed_done

    def lend_installed(self) -> None:
        """From a download's first write on, the installed arrays are no base: the download
        owns them (they end as its output, or garbage if it fails)."""
        if self.installed is not None:
            self.installed = replace(self.installed, tensors={})
        self.installed_spoiled = True

    def follow(self, version: int) -> None:
        """LATEST now names ``version``: forget when it named versions above it."""
        self.want = version
        for named in [v for v in self.seen_at_s if v > version]:
            del self.seen_at_s[named]

    def mark_ready(self, snap: Snapshot, now_s: float) -> None:
        """``snap`` verified: ready to install; versions it superseded are never installed."""
        seen = self.seen_at_s.pop(snap.version, now_s)
        for skipped in [v for v in self.seen_at_s if v < snap.version]:
            del self.seen_at_s[skipped]
        self.ready = Ready(snap, seen, now_s)

    def take_ready(self) -> Ready | None:
        """The ready version, now being installed (still held while it is applied)."""
        ready, self.ready = self.ready, None
        if ready is not None:
            self.installing = ready.snapshot
        return ready

    def put_back(self, ready: Ready) -> None:
        """An install failed: offer its version again, unless a newer one is ready."""
        self.installing = None
        self.ready = self.ready or ready

    def mark_installed(self, snap: Snapshot) -> None:
        self.installed, self.installing = snap, None
        self.installed_spoiled = self.installed_done = False


@dataclass(frozen=True)
class Shared:
    """What the parts of one watcher share: its state under its lock, its settings, clock
    and random source, its failure log, the signal that it is stopping, and who is told
    what happens (metrics)."""

    state: WatchState
    lock: threading.Condition
    config: WatchConfig
    clock: Clock
    rng: random.Random
    failures: FailureLog
    stop: threading.Event
    observer: WatchObserver = IGNORE
