"""Choosing a region at start-up: measure each one, read from the fastest.

For each region, in parallel: latency is the median of a few GETs of LATEST
(a small object; the first GET also pays for the connection, hence several);
throughput is one ranged GET of up to ``probe_bytes`` of the newest version's
largest payload object (it includes one round trip, so it understates every
region alike). A region's score is the time to move a version the size of the
newest one: ``latency_s + bytes / throughput``. Regions that do not answer
are left out; regions whose LATEST lags the newest by more than
``max_lag_versions`` rank after all that do not.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError, StoreError, WanrlError
from ..format.manifests import Manifests
from ..store import ObjectStore, RetryPolicy
from ..units import MiB, require_positive
from .config import RegionsConfig

log = logging.getLogger(__name__)
AUTO = "auto"
DEFAULT_VERSION_BYTES = 64 * MiB  # what the score assumes when no region has a version yet
# Probes fail fast: a region that needs retries to answer is not the one to read from.
PROBE_RETRY = RetryPolicy(
    max_attempts=2, base_delay_s=0.05, max_delay_s=0.2,
    throttled_attempts=2, throttled_base_delay_s=0.05, throttled_max_delay_s=0.2,
)  # fmt: skip


@dataclass(frozen=True)
class RegionProbe:
    """What one region measured like, or why it could not be measured."""

    region: str
    latency_s: float | None = None
    throughput_mbps: float | None = None  # megabits per second
    latest_version: int | None = None
    version_bytes: int | None = None  # stored bytes of the newest version
    error: str | None = None

    @property
    def reachable(self) -> bool:
        return self.error is None and self.latency_s is not None

    def estimate_s(self, nbytes: int) -> float:
        """Time to move ``nbytes`` from this region; infinite when unmeasured."""
        if not self.reachable or not self.throughput_mbps:
            return math.inf
        return (self.latency_s or 0.0) + nbytes * 8 / 1e6 / self.throughput_mbps

    def describe(self) -> str:
        if not self.reachable:
            return f"{self.region}: unreachable ({self.error})"
        rate = "-" if self.throughput_mbps is None else f"{self.throughput_mbps:,.0f} Mbit/s"
        return (
            f"{self.region}: {1000 * (self.latency_s or 0):.0f} ms, {rate}, "
            f"LATEST v{self.latest_version}"
        )


@dataclass(frozen=True)
class RegionChoice:
    """The region to read from, and the order to try the others in (for fallbacks)."""

    region: str
    order: tuple[str, ...]
    probes: tuple[RegionProbe, ...] = ()


def probe_region(
    name: str, store: ObjectStore, *, probe_bytes: int = 4 * MiB, samples: int = 3
) -> RegionProbe:
    """Measure one region's store (see the module docstring); never raises a WanrlError."""
    manifests = Manifests(store)
    try:
        times_s: list[float] = []
        pointer = None
        for _ in range(samples):
            start = time.monotonic()
            pointer = manifests.latest()
            times_s.append(time.monotonic() - start)
        latency_s = statistics.median(times_s)
        if pointer is None:
            return RegionProbe(name, latency_s)
        latest = pointer.version
    except WanrlError as exc:
        return RegionProbe(name, error=str(exc))
    try:
        m = manifests.get(latest)
        biggest = max(m.objects, key=lambda o: o.size, default=None)
        if biggest is None or biggest.size == 0:
            return RegionProbe(name, latency_s, None, latest, m.stored_bytes)
        buf = memoryview(bytearray(min(probe_bytes, biggest.size)))
        start = time.monotonic()
        store.read_into(m.payload_key(biggest.key), 0, buf)
        rate_mbps = len(buf) * 8 / 1e6 / max(time.monotonic() - start, 1e-6)
        return RegionProbe(name, latency_s, rate_mbps, latest, m.stored_bytes)
    except NotFoundError:  # LATEST arrived before the rest (replicating): reachable, unmeasured
        return RegionProbe(name, latency_s, None, latest)
    except WanrlError as exc:
        return RegionProbe(name, error=str(exc))


def probe_regions(
    regions: RegionsConfig,
    *,
    timeout_s: float = 30.0,
    probe_bytes: int = 4 * MiB,
    **store_options: Any,
) -> list[RegionProbe]:
    """Probe every region at once; one that has not answered within ``timeout_s`` is out."""
    require_positive("timeout_s", timeout_s)
    options = {"retry": PROBE_RETRY, **store_options}

    def one(name: str) -> RegionProbe:
        try:
            store = regions.store(name, **options)
        except WanrlError as exc:
            return RegionProbe(name, error=str(exc))
        return probe_region(name, store, probe_bytes=probe_bytes)

    pool = ThreadPoolExecutor(len(regions.regions), thread_name_prefix="wanrl-probe")
    futures = {name: pool.submit(one, name) for name in regions.names}
    wait(futures.values(), timeout=timeout_s)
    pool.shutdown(wait=False, cancel_futures=True)
    return [
        f.result() if f.done() else RegionProbe(name, error=f"no answer in {timeout_s:g} s")
        for name, f in futures.items()
    ]


def rank_regions(
    probes: Sequence[RegionProbe], *, max_lag_versions: int | None = None
) -> list[RegionProbe]:
    """The reachable regions, best first (a pure function of the measurements)."""
    up = [p for p in probes if p.reachable]
    newest = max((p.latest_version for p in up if p.latest_version is not None), default=None)
    nbytes = max((p.version_bytes for p in up if p.version_bytes), default=DEFAULT_VERSION_BYTES)

    def lagging(p: RegionProbe) -> bool:
        if max_lag_versions is None or newest is None:
            return False
        return newest - (-1 if p.latest_version is None else p.latest_version) > max_lag_versions

    return sorted(up, key=lambda p: (lagging(p), p.estimate_s(nbytes), p.region))


def choose_region(
    regions: RegionsConfig,
    wanted: str = AUTO,
    *,
    max_lag_versions: int | None = None,
    timeout_s: float = 30.0,
    **store_options: Any,
) -> RegionChoice:
    """``wanted`` itself, or with ``"auto"`` the best measured region.

    The order for fallbacks is the measured ranking (unreachable regions last),
    or for a named region the primary and then the file's order.
    """
    if wanted != AUTO:
        regions.region(wanted)  # a clear error for an unknown name
        order = dict.fromkeys((wanted, regions.primary, *regions.names))
        return RegionChoice(wanted, tuple(order))
    probes = probe_regions(regions, timeout_s=timeout_s, **store_options)
    ranked = rank_regions(probes, max_lag_versions=max_lag_versions)
    if not ranked:
        raise StoreError("no region answered: " + "; ".join(p.describe() for p in probes))
    order = dict.fromkeys([p.region for p in ranked] + list(regions.names))
    for p in probes:
        log.info("region %s", p.describe())
    return RegionChoice(ranked[0].region, tuple(order), tuple(probes))


__all__ = [
    "AUTO",
    "RegionChoice",
    "RegionProbe",
    "choose_region",
    "probe_region",
    "probe_regions",
    "rank_regions",
]
