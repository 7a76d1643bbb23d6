"""A watcher's settings, and the backoffs it derives from them."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..._exports import renamed_keywords
from ...errors import UsageError
from ...store.retry import Backoff
from ...units import require_int, require_positive


@renamed_keywords({"share_dir": "host_cache_dir"})
@dataclass(frozen=True)
class WatchConfig:
    """How a :class:`Watcher` polls, backs off and holds versions; validated on creation."""

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
    # the host cache: a directory (on a tmpfs: /dev/shm/...) that the watchers of one host
    # use together: each version is downloaded once per host and mapped by all
    # (wanrl_s3.fetch.host_cache)
    host_cache_dir: str | None = None
    # with host_cache_dir: how many of the newest versions' files it keeps (each one a snapshot
    # on disk); 1 for a directory only this watcher uses (no other reader, only staging)
    keep_versions: int = 3
    # in memory (no host_cache_dir): decode the next version into the installed version's own
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
        if self.reuse_installed and self.host_cache_dir:
            raise UsageError(
                "reuse_installed is for versions held in memory; with host_cache_dir they are "
                "files, which hold no second copy in memory anyway"
            )

    @property
    def poll_backoff(self) -> Backoff:
        """After failed reads of LATEST: from the poll interval up to ``max_backoff_s``."""
        return self._backoff(self.poll_interval_s, self.max_backoff_s)

    @property
    def download_backoff(self) -> Backoff:
        """After failed downloads: from ``retry_backoff_s`` up to ``max_backoff_s``."""
        return self._backoff(self.retry_backoff_s, self.max_backoff_s)

    @property
    def visibility_backoff(self) -> Backoff:
        """While a version is not yet whole: from ``visible_backoff_s`` up to the poll interval
        (replication lag is no failure: a worker checks no less often than it polls)."""
        return self._backoff(self.visible_backoff_s, self.poll_interval_s)

    def next_wait_s(self, rng: random.Random) -> float:
        """The wait between two polls that worked: the interval, jittered."""
        return self._backoff(self.poll_interval_s, self.poll_interval_s).wait_s(1, rng)

    def visible_wait_s(self, attempt: int, rng: random.Random) -> float:
        """The wait before visibility check ``attempt`` + 1: exponential, capped, jittered."""
        return self.visibility_backoff.wait_s(attempt, rng)

    def failure_wait_s(self, first_s: float, failures: int, rng: random.Random) -> float:
        """The wait after ``failures`` failures in a row: ``first_s`` doubling up to the cap."""
        return self._backoff(first_s, self.max_backoff_s).wait_s(failures, rng)

    def _backoff(self, first_s: float, cap_s: float) -> Backoff:
        return Backoff.around(first_s, max(first_s, cap_s), self.jitter_fraction)
