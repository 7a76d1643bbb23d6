"""What a publication moves, split by who bills it, and what that costs.

The physics (bytes and requests per publication) and the prices are kept
apart: :class:`Traffic` counts, :func:`run_rates` turns a whole run's traffic
into effective per-GB rates (tiers are monthly volume ladders, so the rate
depends on the total), and :func:`transfer_usd` / :func:`requests_usd` price
any slice of the run at those rates. A publication's share and the run's total
therefore always add up.

Who pays for what:

* object storage: each worker's download leaves the storage provider for the
  internet (the fleet is on a WAN by definition); each extra regional copy
  crosses regions; the publisher's upload leaves the trainer's provider when the
  bucket is elsewhere. PUTs per copy; per worker, its GETs and listings as the reader
  makes them (:mod:`.reads`: 8 MiB ranged GETs, the manifest, a listing of the version's
  folder and of each payload prefix), plus LATEST polling.
* star / peer chain: every copy the trainer sends leaves the trainer's provider;
  relayed copies leave the workers' hosts, billed at ``relay_usd_per_gb``
  (commodity GPU hosts mostly include bandwidth, hence a default of zero).
* behind a CDN (:mod:`wanrl_s3.cost.cdn`): the edges fetch from the bucket (cache
  fill, billed at the CDN's price for that origin) and serve the workers (the
  CDN's own egress ladder and request price).

Free allowances are monthly: a provider's account-wide allowance (AWS's 100 GB)
and B2's "3x the data stored" cover the first gigabytes of each billing month,
before the ladder's first tier. See :func:`effective_usd_per_gb` for how a run
that is shorter or longer than a month is prorated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..units import require_int, require_non_negative, require_positive
from .prices import CdnPrices, EgressTier, StoragePrices
from .reads import chunk_count, fetch_gets, listings

#: Cloud billing months are 730 hours.
SECONDS_PER_MONTH = 730 * 3600.0
#: Objects every version adds besides its chunks: the manifest and the LATEST pointer.
OBJECTS_PER_VERSION = 2


@dataclass(frozen=True)
class Traffic:
    """Gigabytes and requests, each in the bucket of the party that bills it."""

    storage_egress_gb: float = 0.0
    trainer_egress_gb: float = 0.0
    inter_region_gb: float = 0.0
    relay_egress_gb: float = 0.0
    put_requests: float = 0.0
    get_requests: float = 0.0
    cdn_fill_gb: float = 0.0
    cdn_egress_gb: float = 0.0
    cdn_requests: float = 0.0
    list_requests: float = 0.0  # billed at the PUT rate (see :mod:`.reads`)

    def __post_init__(self) -> None:
        for f in fields(self):
            require_non_negative(f.name, getattr(self, f.name))

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def times(self, factor: float) -> Traffic:
        """The same traffic repeated ``factor`` times (e.g. once per publication)."""
        require_non_negative("factor", factor)
        return Traffic(*(getattr(self, f.name) * factor for f in fields(self)))


def upload_traffic(
    payload_gb: float,
    chunk_mb: float,
    regions: int,
    replicate: bool,
    trainer_in_storage_cloud: bool,
) -> Traffic:
    """The publisher's side: one copy per region, by its own uploads or by replication.

    A trainer inside the storage provider's first region uploads there for free
    and pays inter-region for the rest; a trainer elsewhere pays its own egress
    for every copy it sends, which is one copy when the provider replicates.
    """
    require_int("regions", regions)
    extra_copies = regions - 1
    if trainer_in_storage_cloud:
        sent_gb, crossed_gb = 0.0, payload_gb * extra_copies
    elif replicate:
        sent_gb, crossed_gb = payload_gb, payload_gb * extra_copies
    else:
        sent_gb, crossed_gb = payload_gb * regions, 0.0
    puts = regions * (chunk_count(payload_gb, chunk_mb) + OBJECTS_PER_VERSION)
    return Traffic(trainer_egress_gb=sent_gb, inter_region_gb=crossed_gb, put_requests=puts)


def download_traffic(
    payload_gb: float, chunk_mb: float, workers: int, payload_prefixes: int = 1
) -> Traffic:
    """Every worker reads the version from its region as the reader does (:mod:`.reads`):
    the manifest and the payload's ranged GETs, the listings of its folder and prefixes."""
    require_int("workers", workers)
    return Traffic(
        storage_egress_gb=payload_gb * workers,
        get_requests=workers * fetch_gets(payload_gb),
        list_requests=workers * listings(payload_gb, chunk_mb, payload_prefixes),
    )


def polling_traffic(workers: int, period_s: float, poll_interval_s: float) -> Traffic:
    """GETs of LATEST between publications: cheap, but not free, and easy to forget."""
    require_int("workers", workers)
    require_positive("poll_interval_s", poll_interval_s)
    return Traffic(get_requests=workers * require_positive("period_s", period_s) / poll_interval_s)


def push_traffic(payload_gb: float, trainer_copies: int, relay_copies: int) -> Traffic:
    """Star or chain: copies the trainer sends itself, and copies workers relay."""
    require_int("trainer_copies", trainer_copies)
    require_int("relay_copies", relay_copies, minimum=0)
    return Traffic(
        trainer_egress_gb=payload_gb * trainer_copies, relay_egress_gb=payload_gb * relay_copies
    )


def tiered_usd(volume_gb: float, tiers: tuple[EgressTier, ...]) -> float:
    """Price one month's volume on a ladder: each tier's rate covers only its own slice."""
    require_non_negative("volume_gb", volume_gb)
    total, floor_gb = 0.0, 0.0
    for tier in tiers:
        cap_gb = math.inf if tier.up_to_gb is None else tier.up_to_gb
        total += max(0.0, min(volume_gb, cap_gb) - floor_gb) * tier.usd_per_gb
        floor_gb = cap_gb
    return total


def month_usd(volume_gb: float, tiers: tuple[EgressTier, ...], free_gb: float = 0.0) -> float:
    """One month on a ladder whose first ``free_gb`` are free.

    The allowance covers the month's *first* gigabytes, which sit in the first
    tier ("100 GB free, then $0.09 up to 10 TB"); the tier bounds do not move.
    """
    require_non_negative("free_gb", free_gb)
    return tiered_usd(volume_gb, tiers) - tiered_usd(min(volume_gb, free_gb), tiers)


def run_months(run_s: float) -> float:
    """Billing months a run is spread over: at least one, fractional beyond that."""
    return max(1.0, require_positive("run_s", run_s) / SECONDS_PER_MONTH)


def effective_usd_per_gb(
    total_gb: float, run_s: float, tiers: tuple[EgressTier, ...], free_gb_per_month: float = 0.0
) -> float:
    """Average per-GB rate of a run's volume after monthly tiers and a monthly allowance.

    Proration: a run shorter than a month still lands in one billing month, so
    its whole volume climbs one ladder and gets one month's allowance (assuming
    nothing else on the account uses it; ``--no-free-tier`` says otherwise). A
    longer run is spread evenly over ``run_s / 730 h`` months, each with its own
    ladder and its own allowance, so a 1.5-month run gets 1.5 allowances.
    """
    months = run_months(run_s)
    if total_gb <= 0:
        return tiers[0].usd_per_gb
    return months * month_usd(total_gb / months, tiers, free_gb_per_month) / total_gb


def storage_free_gb_per_month(prices: StoragePrices, stored_gb: float, account: bool) -> float:
    """Free egress a month: B2's multiple of this run's own storage, plus the account allowance."""
    require_non_negative("stored_gb", stored_gb)
    account_gb = prices.free_egress_gb_per_month if account else 0.0
    return prices.free_egress_storage_multiple * stored_gb + account_gb


def effective_egress_usd_per_gb(
    total_gb: float,
    run_s: float,
    prices: StoragePrices,
    stored_gb: float = 0.0,
    account_allowance: bool = True,
) -> float:
    """A storage provider's internet egress rate for this run, allowances included."""
    free_gb = storage_free_gb_per_month(prices, stored_gb, account_allowance)
    return effective_usd_per_gb(total_gb, run_s, prices.egress_tiers, free_gb)


@dataclass(frozen=True)
class Rates:
    """Effective prices for one run: per GB of each traffic class, per 1,000 requests."""

    storage_egress_usd_per_gb: float
    trainer_egress_usd_per_gb: float
    inter_region_usd_per_gb: float
    relay_egress_usd_per_gb: float
    put_usd_per_1000: float
    get_usd_per_1000: float
    cdn_fill_usd_per_gb: float = 0.0
    cdn_egress_usd_per_gb: float = 0.0
    cdn_request_usd_per_1000: float = 0.0


@dataclass(frozen=True)
class RunPricing:
    """Who bills what in a run, and the run's shape: all :func:`run_rates` needs but traffic."""

    storage: StoragePrices
    trainer: StoragePrices | None
    run_s: float
    stored_gb: float = 0.0
    relay_usd_per_gb: float = 0.0
    replica_regions: tuple[str, ...] = ()
    cdn: CdnPrices | None = None
    account_allowances: bool = True


def run_rates(run: Traffic, pricing: RunPricing) -> Rates:
    """Rates for this run's volumes; ``pricing.trainer=None`` means a flat-rate trainer link."""
    p, account = pricing, pricing.account_allowances
    trainer_rate = 0.0
    if p.trainer is not None:
        trainer_rate = effective_egress_usd_per_gb(
            run.trainer_egress_gb, p.run_s, p.trainer, account_allowance=account
        )
    cdn_rates = {}
    if p.cdn is not None:
        cdn_free_gb = p.cdn.free_egress_gb_per_month if account else 0.0
        cdn_rates = {
            "cdn_fill_usd_per_gb": p.cdn.fill_usd_per_gb[p.storage.name],
            "cdn_egress_usd_per_gb": effective_usd_per_gb(
                run.cdn_egress_gb, p.run_s, p.cdn.egress_tiers, cdn_free_gb
            ),
            "cdn_request_usd_per_1000": p.cdn.request_usd_per_1000,
        }
    return Rates(
        storage_egress_usd_per_gb=effective_egress_usd_per_gb(
            run.storage_egress_gb, p.run_s, p.storage, p.stored_gb, account
        ),
        trainer_egress_usd_per_gb=trainer_rate,
        inter_region_usd_per_gb=p.storage.inter_region_rate(p.replica_regions),
        relay_egress_usd_per_gb=require_non_negative("relay_usd_per_gb", p.relay_usd_per_gb),
        put_usd_per_1000=p.storage.put_usd_per_1000,
        get_usd_per_1000=p.storage.get_usd_per_1000,
        **cdn_rates,
    )


def transfer_usd(traffic: Traffic, rates: Rates) -> float:
    """Data-transfer dollars (egress of every kind, inter-region copies) for a slice of traffic."""
    return (
        traffic.storage_egress_gb * rates.storage_egress_usd_per_gb
        + traffic.trainer_egress_gb * rates.trainer_egress_usd_per_gb
        + traffic.inter_region_gb * rates.inter_region_usd_per_gb
        + traffic.relay_egress_gb * rates.relay_egress_usd_per_gb
        + traffic.cdn_fill_gb * rates.cdn_fill_usd_per_gb
        + traffic.cdn_egress_gb * rates.cdn_egress_usd_per_gb
    )


def requests_usd(traffic: Traffic, rates: Rates) -> float:
    """Request charges: PUTs of every copy, GETs of every fetch and poll, listings (at the
    PUT rate), CDN edge requests."""
    return (
        (traffic.put_requests + traffic.list_requests) * rates.put_usd_per_1000
        + traffic.get_requests * rates.get_usd_per_1000
        + traffic.cdn_requests * rates.cdn_request_usd_per_1000
    ) / 1000.0


def storage_usd(stored_gb: float, prices: StoragePrices, duration_s: float) -> float:
    """Retained versions held for the run, billed by GB-month actually held."""
    require_non_negative("stored_gb", stored_gb)
    held_months = require_non_negative("duration_s", duration_s) / SECONDS_PER_MONTH
    return stored_gb * prices.storage_usd_per_gb_month * held_months
