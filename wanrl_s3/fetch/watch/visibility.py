"""Whether the version LATEST names is whole in this store yet.

In a replica region, bucket replication can show LATEST before the manifest,
or a manifest before its payload. Such a version is not yet visible, which is
not an error: the reader logs it, backs off and checks again. Past the grace
period it is reported once per pointer (a pointer to a version that does not
exist, or replication that stalled), and still checked.
"""

from __future__ import annotations

import logging
import random
import threading

from ...errors import NotFoundError
from ...store import SYSTEM_CLOCK, Clock
from ..subscriber import Subscriber
from .config import WatchConfig
from .failures import Streak
from .state import Shared

log = logging.getLogger(__name__)


class Visibility:
    """The replication wait of one watcher: its backoff, and since when a version is missing."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._streak = Streak(shared.config.visibility_backoff, shared.rng)
        self._lock = threading.Lock()
        self._since: tuple[int, float] | None = None  # (version, monotonic start)

    def reset(self) -> None:
        """A version found whole, a new pointer or another store: no wait, no error pending."""
        self._streak.reset()
        with self._lock:
            self._since = None
        self._shared.failures.clear("visibility")

    def not_whole(self, sub: Subscriber, want: int, missing: str) -> float:
        """``want`` is not whole at ``sub``'s store: log or report it; the wait before the
        next check."""
        wait_s = self._streak.fail()
        waited_s = self._missing_for_s(want)
        grace_s = self._shared.config.invisible_grace_s
        if waited_s <= grace_s:
            _say_replicating(sub, want, missing, wait_s)
            return wait_s
        failures = self._shared.failures
        failures.record(
            "visibility",
            f"LATEST names v{want}, which is still not whole at {sub.store.url} after "
            f"{waited_s:.0f} s, past the {grace_s:g} s grace (missing {missing}): a pointer to "
            "a version that does not exist, or stalled replication; still checking, and "
            "following LATEST when it changes",
            log_it=failures.get("visibility") is None,  # once per pointer, not per check
        )
        return wait_s

    def _missing_for_s(self, version: int) -> float:
        """How long ``version`` has been named by LATEST and found not whole."""
        now_s = self._shared.clock.monotonic()
        with self._lock:
            if self._since is None or self._since[0] != version:
                self._since = (version, now_s)
            return now_s - self._since[1]


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
        _say_replicating(sub, version, missing, wait_s)
        clock.sleep(wait_s)


def _say_replicating(sub: Subscriber, version: int, missing: str, wait_s: float) -> None:
    log.info(
        "v%d is not yet visible at %s (missing %s): still replicating, not an error; "
        "checking again in %.1f s",
        version,
        sub.store.url,
        missing,
        wait_s,
    )
