"""Requests a plan puts on a bucket: the peak on one prefix, and what polling LATEST costs.

At a thousand workers bytes are not the only limit. A store serves a documented
number of read requests a second per prefix (AWS S3: 5,500 GET/HEAD per partitioned
prefix; the price file's ``request_limits``) and answers the rest 503 SlowDown.
Everything a run reads lies under one prefix (LATEST, the manifests, the payload),
and a new bucket or prefix is one partition until the store has seen the rate for a
while. Per region's bucket (workers spread evenly over the regions, or as the
fleet file places them), for one version:

* **polls**: every worker reads LATEST once per poll interval P: ``N / P`` a
  second, all the time, on one key.
* **the burst**: workers see a new LATEST spread over one poll interval (their polls
  are jittered and out of phase), so ``N / P`` of them a second, each then making a
  listing, a manifest GET and its first ``concurrency`` ranged GETs at once: m = 2 +
  min(n, c) reads, n being the payload over the reader's request size. The busiest
  second, not the mean one: workers arrive at random (Poisson), so ``m (N / P + 2
  sqrt(N / P))``, two standard deviations over the mean.
* **the rest of the payload**: one GET each time a part lands, so at most the
  worker's goodput over the request size, and no more than its other ``n - c``
  GETs spread over the poll interval: ``sum of min(r_i, (n - c) / P)``.

The peak is their sum. benchmarks/fleet_sim.py simulates the same fleet request by
request (docs/scale.md compares the two). Behind a CDN the edges fetch each object
once: the bucket keeps the polls and each worker's listing.

Pure functions, no network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ..units import require_int, require_positive
from .egress import SECONDS_PER_MONTH
from .fleet import GOODPUT_SHARE
from .inputs import BUCKET_ROWS, CDN_ROWS, DELTA_ROWS, LABELS, PlanInputs
from .prices import PriceBook, RequestLimits
from .reads import READ_CONCURRENCY, READ_REQUEST_MB, payload_reads

#: Reads before the payload, per version: the listing (is it whole?) and the manifest.
METADATA_READS = 2
#: Ranged GETs per payload object (the publisher's 64 MiB objects, read 8 MiB at a time).
READS_PER_OBJECT = 8
#: Longest poll interval the remedy proposes (an hour): past it, polling is not the fix.
MAX_POLL_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class ReadRates:
    """Read requests a second on one bucket's prefix at the peak of a publication."""

    polls_per_s: float
    burst_per_s: float
    stream_per_s: float

    @property
    def peak_per_s(self) -> float:
        return self.polls_per_s + self.burst_per_s + self.stream_per_s


def read_rates(
    downlinks_mbps: Sequence[float],
    payload_gb: float,
    poll_interval_s: float,
    cdn: bool = False,
    concurrency: int = READ_CONCURRENCY,
) -> ReadRates:
    """The peak read rate on one bucket whose workers have ``downlinks_mbps`` (see module)."""
    require_positive("poll_interval_s", poll_interval_s)
    require_int("concurrency", concurrency)
    workers = len(downlinks_mbps)
    polls = workers / poll_interval_s
    arrivals_per_s = workers / poll_interval_s
    busiest_s = arrivals_per_s + 2 * math.sqrt(arrivals_per_s)  # workers starting, at most
    if cdn:  # the edges serve manifests and payload; each worker still lists the version
        return ReadRates(polls, busiest_s, 0.0)
    n = payload_reads(payload_gb)
    first = min(n, concurrency)
    rest = (n - first) / poll_interval_s
    request_bytes = READ_REQUEST_MB * 1e6
    stream = sum(
        min(require_positive("downlink_mbps", d) * GOODPUT_SHARE * 1e6 / 8 / request_bytes, rest)
        for d in downlinks_mbps
    )
    return ReadRates(polls, (METADATA_READS + first) * busiest_s, stream)


def polls_per_month(workers: int, poll_interval_s: float) -> float:
    """LATEST reads in a 730-hour month: every worker, every poll interval."""
    require_int("workers", workers)
    return workers * SECONDS_PER_MONTH / require_positive("poll_interval_s", poll_interval_s)


@dataclass(frozen=True)
class RequestLoad:
    """One bucket row's peak read rate on its busiest bucket, against the provider's limit."""

    topology: str
    workers_per_bucket: int
    rates: ReadRates
    limit_per_s: float | None  # None: the provider documents none and none was given
    scope: str
    poll_interval_fit_s: float | None  # the shortest poll interval that fits, if any
    # the busiest single object (LATEST, or a payload object every worker reads) against a
    # per-object ceiling where the provider documents one (Azure's per-blob target)
    object_peak_per_s: float = 0.0
    object_limit_per_s: float | None = None

    @property
    def over(self) -> bool:
        return self.limit_per_s is not None and self.rates.peak_per_s > self.limit_per_s

    @property
    def object_over(self) -> bool:
        limit = self.object_limit_per_s
        return limit is not None and self.object_peak_per_s > limit


def bucket_downlinks(inputs: PlanInputs, workers: int) -> list[float]:
    """The busiest region bucket's workers' downlinks: by the fleet file's regions, else
    ``workers`` spread evenly over ``regions`` at the uniform downlink."""
    fleet = inputs.fleet
    if fleet is not None:
        by_region: dict[str, list[float]] = {}
        for w in fleet.workers:
            by_region.setdefault(w.region, []).append(w.downlink_mbps)
        return max(by_region.values(), key=len)
    return [inputs.downlink_mbps] * math.ceil(workers / inputs.regions)


def _fits_at_s(downlinks: list[float], payload_gb: float, inputs: PlanInputs, cdn: bool,
               limit: float) -> float | None:  # fmt: skip
    """The shortest poll interval (to 0.1 s) whose peak is under ``limit``, if one is."""

    def peak(p: float) -> float:
        return read_rates(downlinks, payload_gb, p, cdn).peak_per_s

    lo, hi = inputs.poll_interval_s, MAX_POLL_INTERVAL_S
    if peak(lo) <= limit:
        return lo
    if peak(hi) > limit:
        return None
    while hi - lo > 0.1:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if peak(mid) > limit else (lo, mid)
    return math.ceil(hi * 10) / 10


def request_load(
    inputs: PlanInputs, topology: str, workers: int, limits: RequestLimits | None,
    read_limit_per_s: float | None = None,
) -> RequestLoad:  # fmt: skip
    """The peak read rate ``topology`` puts on its busiest bucket with ``workers`` workers.

    ``read_limit_per_s`` replaces the provider's documented limit (a pre-partitioned
    prefix, a private store); with neither, nothing is checked.
    """
    if topology not in BUCKET_ROWS:
        raise UsageError(f"{topology!r} reads no bucket: one of {', '.join(BUCKET_ROWS)}")
    downlinks = bucket_downlinks(inputs, workers)
    payload_gb = inputs.delta_row_gb if topology in DELTA_ROWS else inputs.full_gb
    cdn = topology in CDN_ROWS
    rates = read_rates(downlinks, payload_gb, inputs.poll_interval_s, cdn)
    limit = read_limit_per_s if read_limit_per_s is not None else (
        limits.read_per_s if limits is not None else None)  # fmt: skip
    if read_limit_per_s is not None:
        require_positive("read_limit_per_s", read_limit_per_s)
    fit = None if limit is None else _fits_at_s(downlinks, payload_gb, inputs, cdn, limit)
    scope = limits.scope if limits is not None and read_limit_per_s is None else "prefix"
    per_worker = 1 if cdn else min(payload_reads(payload_gb), READS_PER_OBJECT)
    hottest = len(downlinks) / inputs.poll_interval_s * per_worker  # LATEST: per_worker 1
    per_object = limits.object_read_per_s if limits is not None else None
    return RequestLoad(topology, len(downlinks), rates, limit, scope, fit, hottest, per_object)


def request_loads(
    inputs: PlanInputs, rows: Sequence[tuple[str, int]], prices: PriceBook,
    read_limit_per_s: float | None = None,
) -> tuple[RequestLoad, ...]:  # fmt: skip
    """:func:`request_load` for each (bucket row, fleet size) of a plan."""
    limits = prices.provider(inputs.provider).request_limits
    return tuple(
        request_load(inputs, name, workers, limits, read_limit_per_s)
        for name, workers in rows
        if name in BUCKET_ROWS
    )


def object_warning(load: RequestLoad, provider: str) -> str:
    """One line for a row whose busiest object is read faster than its documented ceiling."""
    return (
        f"{LABELS[load.topology]}: one object (LATEST, or a payload object every worker reads) "
        f"is read {load.object_peak_per_s:,.0f} times a second on the busiest bucket, over "
        f"{provider}'s {load.object_limit_per_s:,.0f} per object: poll less often "
        "(--poll-interval-s) or put a CDN in front"
    )


def remedy(load: RequestLoad, cdn_peak_per_s: float | None) -> str:
    """What brings an over-limit row under its limit, most specific first."""
    fixes = []
    if load.poll_interval_fit_s is not None:
        fixes.append(f"poll every {load.poll_interval_fit_s:g} s or more (--poll-interval-s)")
    if load.topology not in CDN_ROWS and cdn_peak_per_s is not None:
        fixes.append(
            f"put a CDN in front (the bucket then sees {cdn_peak_per_s:,.0f}/s: polls and listings)"
        )
    fixes.append("spread the workers over more region buckets (--regions)")
    fixes.append("or get a higher limit from the provider (then --read-limit-per-s)")
    return "; ".join(fixes)


def load_warning(load: RequestLoad, provider: str, cdn_peak_per_s: float | None) -> str:
    """One line for an over-limit row: the peak, its parts, the limit and the remedy."""
    r = load.rates
    return (
        f"{LABELS[load.topology]}: {load.workers_per_bucket:,} workers on one bucket make "
        f"{r.peak_per_s:,.0f} reads/s at a publication's peak (LATEST polls "
        f"{r.polls_per_s:,.0f}/s, fetches {r.burst_per_s + r.stream_per_s:,.0f}/s), over "
        f"{provider}'s {load.limit_per_s:,.0f} per {load.scope}: expect 503 SlowDown, "
        f"retries and a slower broadcast; remedy: {remedy(load, cdn_peak_per_s)}"
    )
