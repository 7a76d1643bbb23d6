"""Broadcast time for a real fleet: every worker on its own link, T_bcast at a fraction.

The uniform formulas in :mod:`.topology` give one worker's time on one link. A
real fleet mixes 50 Mbit/s homes with 1 Gbit/s data centres and 10 ms with 200
ms round trips, and the capacity rule needs T_bcast *at a fraction f of the
fleet*, not the mean and not the slowest. So each worker's own time is modelled
from the moment the version is committed (the moment ``wanrl-s3 status``
measures from), and T_bcast is the f-quantile over workers, by the rule the
status report uses: the ceil(f * N)-th smallest time.

One worker's time through object storage (:func:`object_storage_worker_s`):

    poll delay (half the poll interval, on average)
    + round trips in sequence (the LATEST poll that sees it, the listing that
      checks it is whole, its manifest, the payload GET) x the worker's RTT
    + the bytes it downloads over its downlink, at TCP's goodput (1448 data
      bytes per 1514 on the wire: :data:`GOODPUT_SHARE`)
    + verify, decode and install, which touch the whole snapshot even for a
      delta (every tensor is hashed and the file rewritten), at its install rate
      (a delta's own rate where one was measured: it decodes as well)
    + the wait for the engine's next batch boundary, where it installs (zero
      unless given: on average half the time one generation batch takes)

Through a peer chain (:func:`chain_worker_times_s`), chunk by chunk,
store-and-forward: a hop starts sending chunk j once it holds j and has finished
sending j-1; each hop runs at the slower of the sender's uplink and the
receiver's downlink (the trainer's uplink split over the chains) and adds the
one-way latency between the two hosts. With uniform links and no latency this
is :func:`.topology.chain_pipelined_s` exactly.

Pure functions: the fleet comes in as :class:`WorkerLink` rows (from a file,
see :mod:`.fleet_file`, or from the workers' status objects).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ..units import require_int, require_non_negative, require_positive
from .topology import MB_PER_GB, chain_count, transfer_s

#: Requests in sequence from a poll that finds a new LATEST to the payload's first
#: byte: the poll itself, the listing of the version's folder (is it whole?), its
#: manifest, the payload GET (fetch/watch/, fetch/subscriber.py). A delta whose
#: base manifests are already cached costs the same.
FETCH_ROUND_TRIPS = 4
#: Verify (BLAKE3), decode and write the snapshot, MB/s, when nothing was measured.
DEFAULT_INSTALL_MB_PER_S = 500.0
#: Payload bytes per byte on the wire for TCP over Ethernet-sized packets (1448 of 1514):
#: a link sold at R Mbit/s delivers about 0.956 R of data.
GOODPUT_SHARE = 1448 / 1514


@dataclass(frozen=True)
class WorkerLink:
    """One rollout host's access link: rates each way, round trip to its bucket, region."""

    name: str
    downlink_mbps: float
    uplink_mbps: float
    rtt_ms: float
    region: str = ""
    install_mb_per_s: float | None = None  # measured; None: the plan's default

    def __post_init__(self) -> None:
        require_positive("downlink_mbps", self.downlink_mbps)
        require_positive("uplink_mbps", self.uplink_mbps)
        require_non_negative("rtt_ms", self.rtt_ms)
        if self.install_mb_per_s is not None:
            require_positive("install_mb_per_s", self.install_mb_per_s)

    @property
    def rtt_s(self) -> float:
        """The round trip to the bucket in seconds (``rtt_ms`` / 1000)."""
        return self.rtt_ms / 1000.0


@dataclass(frozen=True)
class FleetLinks:
    """The fleet a plan is made for: one row per worker, names unique."""

    workers: tuple[WorkerLink, ...]

    def __post_init__(self) -> None:
        if not self.workers:
            raise UsageError("a fleet needs at least one worker")
        seen: set[str] = set()
        for w in self.workers:  # a set, not list.count: linear in a 100,000-row fleet
            if w.name in seen:
                raise UsageError(f"worker name {w.name!r} appears twice in the fleet")
            seen.add(w.name)

    def __len__(self) -> int:
        return len(self.workers)

    @property
    def median_downlink_mbps(self) -> float:
        """The median worker's downlink, Mbit/s: the rate a typical fetch runs at."""
        return float(statistics.median(w.downlink_mbps for w in self.workers))


@dataclass(frozen=True)
class FetchModel:
    """What a fetch costs beyond its bytes: polling, round trips, installing."""

    poll_interval_s: float = 10.0
    round_trips: int = FETCH_ROUND_TRIPS
    install_mb_per_s: float = DEFAULT_INSTALL_MB_PER_S
    delta_install_mb_per_s: float | None = None  # decoding a delta too; None: the same
    goodput_share: float = GOODPUT_SHARE
    # Verified in memory -> installed: the engine installs between two generation batches.
    batch_wait_s: float = 0.0

    def __post_init__(self) -> None:
        require_positive("poll_interval_s", self.poll_interval_s)
        require_non_negative("batch_wait_s", self.batch_wait_s)
        require_int("round_trips", self.round_trips, minimum=0)
        require_positive("install_mb_per_s", self.install_mb_per_s)
        if self.delta_install_mb_per_s is not None:
            require_positive("delta_install_mb_per_s", self.delta_install_mb_per_s)
        if not 0.0 < self.goodput_share <= 1.0:
            raise UsageError(f"goodput_share must be in (0, 1], got {self.goodput_share!r}")

    def install_s(self, link: WorkerLink, snapshot_gb: float, delta: bool = False) -> float:
        """Verify, decode and write the whole snapshot on ``link``'s host."""
        rate = link.install_mb_per_s or self.install_mb_per_s
        if delta and self.delta_install_mb_per_s is not None and link.install_mb_per_s is None:
            rate = self.delta_install_mb_per_s
        return snapshot_gb * MB_PER_GB / rate

    def wire_s(self, payload_gb: float, rate_mbps: float) -> float:
        """Seconds to move ``payload_gb`` of data over a link sold at ``rate_mbps``."""
        return transfer_s(payload_gb, rate_mbps * self.goodput_share)


def quantile_index(workers: int, fraction: float) -> int:
    """0-based index of the worker that completes ``fraction`` of ``workers``: ceil(f*N)-1.

    The same rule as ``wanrl-s3 status``, so a prediction and a measurement
    name the same worker's time.
    """
    require_int("workers", workers)
    if not (isinstance(fraction, (int, float)) and 0.0 < fraction <= 1.0):
        raise UsageError(f"fraction must be in (0, 1], got {fraction!r}")
    return max(1, math.ceil(fraction * workers - 1e-9)) - 1


def at_fraction_s(times_s: Sequence[float], fraction: float) -> float:
    """The time by which ``fraction`` of the workers were done (see quantile_index)."""
    return sorted(times_s)[quantile_index(len(times_s), fraction)]


def object_storage_worker_terms(
    link: WorkerLink, payload_gb: float, snapshot_gb: float, fetch: FetchModel, delta: bool = False
) -> dict[str, float]:
    """The terms of :func:`object_storage_worker_s`, named, in the order they happen.

    ``requests_s`` is every round trip in sequence (:data:`FETCH_ROUND_TRIPS` by
    default: the poll that sees the version, the listing, the manifest, the payload GET).
    """
    return {
        "poll_s": fetch.poll_interval_s / 2.0,
        "requests_s": fetch.round_trips * link.rtt_s,
        "wire_s": fetch.wire_s(payload_gb, link.downlink_mbps),
        "install_s": fetch.install_s(link, snapshot_gb, delta),
        "batch_wait_s": fetch.batch_wait_s,
    }


def object_storage_worker_s(
    link: WorkerLink, payload_gb: float, snapshot_gb: float, fetch: FetchModel, delta: bool = False
) -> float:
    """One worker's time from the manifest's commit to its install (see module doc).

    ``delta``: the payload is a delta (installed at the delta rate). Said, not inferred
    from the sizes: a coded full version is smaller than the snapshot too.
    """
    return sum(object_storage_worker_terms(link, payload_gb, snapshot_gb, fetch, delta).values())


def object_storage_fleet_s(
    fleet: FleetLinks,
    payload_gb: float,
    snapshot_gb: float,
    fetch: FetchModel,
    fraction: float = 0.9,
    delta: bool = False,
) -> float:
    """T_bcast at ``fraction`` after the commit: the f-quantile of the workers' own times."""
    times = [
        object_storage_worker_s(w, payload_gb, snapshot_gb, fetch, delta) for w in fleet.workers
    ]
    return at_fraction_s(times, fraction)


def star_fleet_s(
    fleet: FleetLinks,
    payload_gb: float,
    snapshot_gb: float,
    uplink_mbps: float,
    fetch: FetchModel,
    fraction: float = 0.9,
    delta: bool = False,
) -> float:
    """The trainer pushes to all N at once: worker i gets min(its downlink, B0 / N)."""
    share_mbps = uplink_mbps / len(fleet)
    times = [
        w.rtt_s
        + fetch.wire_s(payload_gb, min(w.downlink_mbps, share_mbps))
        + fetch.install_s(w, snapshot_gb, delta)
        + fetch.batch_wait_s
        for w in fleet.workers
    ]
    return at_fraction_s(times, fraction)


def fleet_chain_count(fleet: FleetLinks, uplink_mbps: float) -> int:
    """Chains the trainer's uplink feeds at the fleet's median downlink (at least one)."""
    return chain_count(uplink_mbps, fleet.median_downlink_mbps)


def chain_layout(fleet: FleetLinks, chains: int) -> tuple[tuple[int, ...], ...]:
    """Workers (by index) dealt into ``chains`` chains, fastest downlinks nearest the trainer.

    A chunk crosses every hop of its chain, so a slow host early would hold up
    everyone behind it during the fill; dealing the fastest first keeps the
    chains' depths within one and their heads fast.
    """
    require_int("chains", chains)
    order = sorted(
        range(len(fleet)), key=lambda i: (-fleet.workers[i].downlink_mbps, fleet.workers[i].name)
    )
    return tuple(tuple(order[c::chains]) for c in range(min(chains, len(order))))


def chunk_sizes_gb(payload_gb: float, chunk_mb: float) -> list[float]:
    """The payload cut into chunks of ``chunk_mb`` (the last one shorter)."""
    require_non_negative("payload_gb", payload_gb)
    require_positive("chunk_mb", chunk_mb)
    chunk_gb = chunk_mb / MB_PER_GB
    whole = int(payload_gb // chunk_gb)
    rest = payload_gb - whole * chunk_gb
    sizes = [chunk_gb] * whole + ([rest] if rest > 1e-12 or whole == 0 else [])
    return sizes


def _hop_arrivals_s(
    ready_s: list[float], sizes_gb: list[float], rate_mbps: float, latency_s: float
) -> list[float]:
    """When each chunk has fully arrived after one store-and-forward hop (rate: goodput).

    The chunks have at most two sizes (see chunk_sizes_gb): each size's time is
    worked out once per hop, not once per chunk.
    """
    took_s = {size: transfer_s(size, rate_mbps) for size in set(sizes_gb)}
    free_s, arrived = 0.0, []
    for ready, size in zip(ready_s, sizes_gb, strict=True):
        start = max(ready, free_s)
        free_s = start + took_s[size]
        arrived.append(free_s + latency_s)
    return arrived


def chain_worker_times_s(
    fleet: FleetLinks,
    payload_gb: float,
    snapshot_gb: float,
    uplink_mbps: float,
    fetch: FetchModel,
    chunk_mb: float = 64.0,
    chains: int | None = None,
    trainer_rtt_ms: float = 0.0,
    delta: bool = False,
) -> list[float]:
    """Each worker's time (fleet order) from the trainer's first byte to its install."""
    require_positive("uplink_mbps", uplink_mbps)
    require_non_negative("trainer_rtt_ms", trainer_rtt_ms)
    k = chains if chains is not None else fleet_chain_count(fleet, uplink_mbps)
    sizes = chunk_sizes_gb(payload_gb, chunk_mb)
    times = [0.0] * len(fleet)
    for chain in chain_layout(fleet, k):
        ready = [0.0] * len(sizes)
        send_mbps, send_rtt_s = uplink_mbps / k, trainer_rtt_ms / 1000.0
        for index in chain:
            w = fleet.workers[index]
            rate = min(send_mbps, w.downlink_mbps) * fetch.goodput_share
            ready = _hop_arrivals_s(ready, sizes, rate, (send_rtt_s + w.rtt_s) / 2.0)
            times[index] = ready[-1] + fetch.install_s(w, snapshot_gb, delta) + fetch.batch_wait_s
            send_mbps, send_rtt_s = w.uplink_mbps, w.rtt_s
    return times


def chain_fleet_s(
    fleet: FleetLinks,
    payload_gb: float,
    snapshot_gb: float,
    uplink_mbps: float,
    fetch: FetchModel,
    fraction: float = 0.9,
    chunk_mb: float = 64.0,
    chains: int | None = None,
    delta: bool = False,
) -> float:
    """T_bcast at ``fraction`` for the peer chain(s) over this fleet's links."""
    times = chain_worker_times_s(
        fleet, payload_gb, snapshot_gb, uplink_mbps, fetch, chunk_mb, chains, delta=delta
    )
    return at_fraction_s(times, fraction)
