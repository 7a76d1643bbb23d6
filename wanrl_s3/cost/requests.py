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

The peak is their sum, all on the run's prefix. With the payload dealt over K payload
prefixes (``publish --payload-prefixes K``: object n under prefix n mod K, eight GETs
to an object) the run's prefix keeps the polls, the listing and the manifest; each
payload prefix gets a listing per worker and its share of the ranged GETs: of the
first ``c`` at most what the deal puts on one prefix (the first GETs of every worker
go to the version's first objects), of the rest its share of the objects. The peak is
then the busier of the run's prefix and the busiest payload prefix, and the smallest K
that brings it under a per-prefix limit is the remedy :func:`remedy` names.
benchmarks/fleet_sim.py simulates the same fleet request by request (docs/scale.md
compares the two). Behind a CDN the edges fetch each object once: the bucket keeps
the polls and each worker's listings.

Pure functions, no network.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ..units import require_int, require_positive
from .egress import SECONDS_PER_MONTH
from .fleet import GOODPUT_SHARE
from .inputs import BUCKET_ROWS, CDN_ROWS, DELTA_ROWS, LABELS, PlanInputs
from .prices import PriceBook, RequestLimits
from .reads import (
    MAX_PAYLOAD_PREFIXES,
    READ_CONCURRENCY,
    READ_REQUEST_MB,
    payload_reads,
    require_prefixes,
)

#: Reads before the payload, per version: the listing (is it whole?) and the manifest.
METADATA_READS = 2
#: Ranged GETs per payload object (the publisher's 64 MiB objects, read 8 MiB at a time).
READS_PER_OBJECT = 8
#: Longest poll interval the remedy proposes (an hour): past it, polling is not the fix.
MAX_POLL_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class ReadRates:
    """Read requests a second on one bucket at the peak of a publication: the bucket's
    polls, fetch bursts and streamed GETs (all its prefixes), and its busiest prefixes."""

    polls_per_s: float
    burst_per_s: float
    stream_per_s: float
    run_prefix_per_s: float  # LATEST, listings of the version, manifests (and payload, K = 1)
    payload_prefix_per_s: float = 0.0  # the busiest payload prefix; 0.0 with one prefix

    @property
    def total_per_s(self) -> float:
        """Every read the bucket gets a second at the peak, on all its prefixes."""
        return self.polls_per_s + self.burst_per_s + self.stream_per_s

    @property
    def peak_per_s(self) -> float:
        """The busiest prefix's reads a second: what a per-prefix limit is checked against."""
        return max(self.run_prefix_per_s, self.payload_prefix_per_s)


def read_rates(
    downlinks_mbps: Sequence[float],
    payload_gb: float,
    poll_interval_s: float,
    cdn: bool = False,
    concurrency: int = READ_CONCURRENCY,
    payload_prefixes: int = 1,
) -> ReadRates:
    """The peak read rate on one bucket whose workers have ``downlinks_mbps``, its payload
    dealt over ``payload_prefixes`` (see module)."""
    require_positive("poll_interval_s", poll_interval_s)
    require_int("concurrency", concurrency)
    apart = require_prefixes(payload_prefixes) > 1
    polls = len(downlinks_mbps) / poll_interval_s  # also the workers seeing a version a second
    starting = polls + 2 * math.sqrt(polls)  # workers starting in the busiest second
    n = payload_reads(payload_gb)
    first = min(n, concurrency)
    burst_on = prefix_reads(0, first, payload_prefixes)
    rest_on = prefix_reads(first, n, payload_prefixes)
    dealt = set(burst_on) | set(rest_on)  # the payload prefixes the version's objects lie under
    listed = len(dealt) if apart else 0  # each worker lists each of them
    if cdn:  # the edges serve manifests and payload; each worker still lists the version
        burst = (1 + listed) * starting
        return ReadRates(polls, burst, 0.0, polls + (starting if apart else burst),
                         starting if apart else 0.0)  # fmt: skip
    rest = (n - first) / poll_interval_s
    request_bytes = READ_REQUEST_MB * 1e6
    stream = sum(
        min(require_positive("downlink_mbps", d) * GOODPUT_SHARE * 1e6 / 8 / request_bytes, rest)
        for d in downlinks_mbps
    )
    burst = (METADATA_READS + listed + first) * starting
    if not apart:
        return ReadRates(polls, burst, stream, polls + burst + stream)
    payload = max(
        (1 + burst_on[k]) * starting + (stream * rest_on[k] / (n - first) if n > first else 0.0)
        for k in dealt
    )
    return ReadRates(polls, burst, stream, polls + METADATA_READS * starting, payload)


def prefix_reads(start: int, stop: int, prefixes: int) -> Counter[int]:
    """How many of one worker's ranged GETs ``start`` to ``stop - 1`` land on each payload
    prefix (``READS_PER_OBJECT`` GETs to an object, object n under prefix n mod
    ``prefixes``: the publisher's deal, up to the version's offset, which only renames them)."""
    return Counter((i // READS_PER_OBJECT) % prefixes for i in range(start, stop))


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
    # the fewest payload prefixes that bring a per-prefix limit's busiest prefix under it
    # (None: no limit per prefix, or the run's prefix alone is over it)
    payload_prefixes_fit: int | None = None

    @property
    def peak_per_s(self) -> float:
        """The reads a second the limit is checked against: the busiest prefix's, or the
        bucket's (account's) when the provider's limit is on the bucket (account)."""
        return _scoped_peak(self.rates, self.scope)

    @property
    def over(self) -> bool:
        return self.limit_per_s is not None and self.peak_per_s > self.limit_per_s

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


def _scoped_peak(rates: ReadRates, scope: str) -> float:
    return rates.peak_per_s if scope == "prefix" else rates.total_per_s


def _fits_at_s(downlinks: list[float], payload_gb: float, inputs: PlanInputs, cdn: bool,
               limit: float, scope: str) -> float | None:  # fmt: skip
    """The shortest poll interval (to 0.1 s) whose peak is under ``limit``, if one is."""

    def peak(p: float) -> float:
        rates = read_rates(downlinks, payload_gb, p, cdn, payload_prefixes=inputs.payload_prefixes)
        return _scoped_peak(rates, scope)

    lo, hi = inputs.poll_interval_s, MAX_POLL_INTERVAL_S
    if peak(lo) <= limit:
        return lo
    if peak(hi) > limit:
        return None
    while hi - lo > 0.1:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if peak(mid) > limit else (lo, mid)
    return math.ceil(hi * 10) / 10


def payload_prefixes_fit(
    downlinks_mbps: Sequence[float], payload_gb: float, poll_interval_s: float,
    limit_per_s: float, cdn: bool = False,
) -> int | None:  # fmt: skip
    """The fewest payload prefixes whose busiest prefix (:func:`read_rates`) is under a
    per-prefix ``limit_per_s``; None when even one per object leaves a prefix over it (the
    run's prefix carries the polls, listings and manifests whatever K is)."""
    require_positive("limit_per_s", limit_per_s)
    objects = math.ceil(payload_reads(payload_gb) / READS_PER_OBJECT)

    def peak(k: int) -> float:
        rates = read_rates(downlinks_mbps, payload_gb, poll_interval_s, cdn, payload_prefixes=k)
        return rates.peak_per_s

    most = max(2, min(MAX_PAYLOAD_PREFIXES, objects))
    if peak(most) > limit_per_s:
        return None
    return next(k for k in range(1, most + 1) if peak(k) <= limit_per_s)


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
    rates = read_rates(
        downlinks, payload_gb, inputs.poll_interval_s, cdn, payload_prefixes=inputs.payload_prefixes
    )
    limit = read_limit_per_s if read_limit_per_s is not None else (
        limits.read_per_s if limits is not None else None)  # fmt: skip
    if read_limit_per_s is not None:
        require_positive("read_limit_per_s", read_limit_per_s)
    scope = limits.scope if limits is not None and read_limit_per_s is None else "prefix"
    fit = None if limit is None else _fits_at_s(downlinks, payload_gb, inputs, cdn, limit, scope)
    spread = None if limit is None or scope != "prefix" else payload_prefixes_fit(
        downlinks, payload_gb, inputs.poll_interval_s, limit, cdn)  # fmt: skip
    per_worker = 1 if cdn else min(payload_reads(payload_gb), READS_PER_OBJECT)
    hottest = len(downlinks) / inputs.poll_interval_s * per_worker  # LATEST: per_worker 1
    per_object = limits.object_read_per_s if limits is not None else None
    return RequestLoad(
        topology, len(downlinks), rates, limit, scope, fit, hottest, per_object, spread
    )


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
    k = load.payload_prefixes_fit
    if k is not None and k > 1:
        fixes.append(
            f"deal the payload over {k} prefixes (publish --payload-prefixes {k}; the busiest "
            "prefix then stays under the limit; simulated, no slower: docs/scale.md)"
        )
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
    where = "one prefix" if load.scope == "prefix" else f"one {load.scope}"
    parts = f"LATEST polls {r.polls_per_s:,.0f}/s, fetches {r.burst_per_s + r.stream_per_s:,.0f}/s"
    if r.payload_prefix_per_s and load.scope == "prefix":
        parts = (
            f"the run's prefix {r.run_prefix_per_s:,.0f}/s, the busiest payload prefix "
            f"{r.payload_prefix_per_s:,.0f}/s"
        )
    return (
        f"{LABELS[load.topology]}: {load.workers_per_bucket:,} workers on one bucket make "
        f"{load.peak_per_s:,.0f} reads/s on {where} at a publication's peak ({parts}), over "
        f"{provider}'s {load.limit_per_s:,.0f} per {load.scope}: expect 503 SlowDown, "
        f"retries and a slower broadcast; remedy: {remedy(load, cdn_peak_per_s)}"
    )
