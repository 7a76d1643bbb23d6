"""Falling back from a region that lags the primary, and coming back when it catches up.

A replica can stall (replication paused, a relay down, a bucket policy
broken): its LATEST stops moving, or moves without the payload ever
arriving. A worker there would run an ever older policy. :class:`RegionFailover`
compares, every ``check_interval_s``, the primary's LATEST with the newest
version the worker's region has shown whole (held, or found visible before a
download); when the gap exceeds ``max_lag_versions`` it moves the
:class:`~wanrl_s3.Watcher` to the first region in preference order that
is within the limit (the primary always is), says so in a log line and through
``on_switch`` (the worker's status object), and moves back once the home
region holds, whole, the version its LATEST names, and that is no older than
the one the worker holds. Reading across
regions costs inter-region egress, which is why the worker goes home.

:meth:`RegionFailover.maybe_check` runs in the worker's main loop; whatever a
check raises is logged in one line and kept as :attr:`RegionFailover.failure`
(the worker writes it into its status object), and the next check tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import WanrlError
from ..fetch.subscriber import Subscriber
from ..fetch.watch import Failure, Watcher
from ..store import SYSTEM_CLOCK, Clock
from ..units import require_int, require_positive
from .config import RegionsConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailoverConfig:
    """When a worker leaves its region: ``max_lag_versions``, the most its region's newest
    whole version may trail the primary's LATEST (``wanrl-s3 worker --max-lag-versions``);
    ``check_interval_s``, how often :meth:`RegionFailover.maybe_check` compares them."""

    max_lag_versions: int
    check_interval_s: float = 10.0

    def __post_init__(self) -> None:
        require_int("max_lag_versions", self.max_lag_versions)
        require_positive("check_interval_s", self.check_interval_s)


class RegionFailover:
    """Keeps one Watcher on a region that is not too far behind the primary.

    ``home``: the worker's own region (``watcher`` reads it at the start).
    ``subscriber_for(name)`` opens a region's subscriber; they are opened on
    first use and closed by :meth:`close`, after the watcher has stopped.
    ``order``: the regions to try first when falling back (a
    :func:`~wanrl_s3.choose_region` result's ``order``); then the primary and the
    file's order. ``on_switch(region, fallback)`` hears each move (``fallback`` is
    None when back home). :attr:`serving` is the region read now, :attr:`fallback`
    why it is not ``home``.
    """

    def __init__(
        self,
        regions: RegionsConfig,
        home: str,
        watcher: Watcher,
        subscriber_for: Callable[[str], Subscriber],
        config: FailoverConfig,
        *,
        order: Sequence[str] = (),
        clock: Clock = SYSTEM_CLOCK,
        on_switch: Callable[[str, str | None], None] | None = None,
    ) -> None:
        regions.region(home)
        self.regions, self.home, self.serving = regions, home, home
        self.watcher, self.config, self.clock = watcher, config, clock
        self.fallback: str | None = None  # why we read from ``serving``, while it is not home
        self.failure: Failure | None = None  # the last check's, until one succeeds
        self._open = subscriber_for
        self._subs: dict[str, Subscriber] = {home: watcher.sub}
        self._order = tuple(dict.fromkeys((*order, regions.primary, *regions.names)))
        self._on_switch = on_switch
        self._next_check_s = clock.monotonic() + config.check_interval_s

    def close(self) -> None:
        """Close the subscribers this opened (the home one belongs to the caller)."""
        for name, sub in self._subs.items():
            if name != self.home:
                sub.close()

    def maybe_check(self) -> str | None:
        """:meth:`check` if ``check_interval_s`` has passed since the last one."""
        now = self.clock.monotonic()
        if now < self._next_check_s:
            return None
        self._next_check_s = now + self.config.check_interval_s
        try:
            moved = self.check()
        except Exception as exc:  # the worker must go on serving what it holds
            message = f"region check failed: {type(exc).__name__}: {exc}"
            log.warning("%s", message)
            self.failure = Failure("region", message, self.clock.time())
            return None
        self.failure = None
        return moved

    def check(self) -> str | None:
        """Compare with the primary once; a sentence when the watcher moved, else None."""
        if self.home == self.regions.primary:
            return None
        primary = self._latest(self.regions.primary)
        if primary is None:
            return None
        if self.serving != self.home:
            return self._maybe_go_home(primary)
        region_version = self.watcher.region_version
        lag = primary - (-1 if region_version is None else region_version)
        limit = self.config.max_lag_versions
        if lag <= limit:
            return None
        for name in self._order:
            if name == self.serving:
                continue
            latest = primary if name == self.regions.primary else self._latest(name)
            if latest is not None and primary - latest <= limit:
                reason = (
                    f"region {self.home} lags the primary {self.regions.primary} by {lag} "
                    f"versions (limit {limit}): reading from region {name}"
                )
                return self._switch(name, reason)
        log.warning(
            "region %s lags the primary by %d versions, and no region is within %d",
            self.home,
            lag,
            limit,
        )
        return None

    def _maybe_go_home(self, primary: int) -> str | None:
        """Back home once its LATEST is whole there, within the limit and not behind us."""
        home = self._latest(self.home)
        held = self.watcher.held_version
        if (
            home is None
            or home < (-1 if held is None else held)
            or primary - home > self.config.max_lag_versions
        ):
            return None
        try:
            if not self._subscriber(self.home).is_visible(home):  # whole, keyframe and all
                return None
        except WanrlError as exc:
            log.info("region %s: v%d unreadable (%s)", self.home, home, exc)
            return None
        return self._switch(
            self.home,
            f"region {self.home} has caught up (v{home} is whole "
            f"there): reading from it again, not from {self.serving}",
        )

    def _switch(self, name: str, sentence: str) -> str:
        log.warning("%s", sentence)
        self.watcher.switch(self._subscriber(name))
        self.serving = name
        self.fallback = None if name == self.home else sentence
        if self._on_switch is not None:
            self._on_switch(name, self.fallback)
        return sentence

    def _subscriber(self, name: str) -> Subscriber:
        if name not in self._subs:
            self._subs[name] = self._open(name)
        return self._subs[name]

    def _latest(self, name: str) -> int | None:
        """A region's LATEST version; None when it has none or does not answer."""
        try:
            latest = self._subscriber(name).latest()
        except WanrlError as exc:
            log.info("region %s: LATEST unreadable (%s)", name, exc)
            return None
        return None if latest is None else latest.version


__all__ = ["FailoverConfig", "RegionFailover"]
