"""What each topology moves per publication and per run, and what that costs besides GPUs.

The bytes come from :class:`~wanrl_s3.cost.inputs.PlanInputs`: full versions
(the fleet's start, keyframes, every star or chain push, retained versions) at
their coded size ``full_gb``, deltas at ``delta_row_gb``. The prices come from
:mod:`.egress` and :mod:`.cdn`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from . import egress, topology
from .cdn import cdn_download_traffic
from .inputs import CDN_ROWS, DELTA_ROWS, FLAT_RATE, LABELS, TOPOLOGIES, PlanInputs
from .prices import CdnPrices, PriceBook, StoragePrices


def traffic(
    inputs: PlanInputs, name: str, workers: int, period_s: float
) -> tuple[egress.Traffic, egress.Traffic, float]:
    """Per-publication traffic, the initial full distribution, and GB kept in storage."""
    i, full_gb = inputs, inputs.full_gb
    if name in ("star", "peer_chain"):
        trainer_copies = workers if name == "star" else min(workers, chains(i))
        per_pub = egress.push_traffic(full_gb, trainer_copies, workers - trainer_copies)
        return per_pub, per_pub, 0.0
    in_cloud = i.trainer_provider in (None, i.provider)

    def upload(gb: float) -> egress.Traffic:
        return egress.upload_traffic(gb, i.chunk_mb, i.regions, i.replicate, in_cloud)

    def download(gb: float) -> egress.Traffic:
        if name in CDN_ROWS:
            return cdn_download_traffic(gb, i.chunk_mb, workers, i.cdn_edges, i.payload_prefixes)
        return egress.download_traffic(gb, i.chunk_mb, workers, i.payload_prefixes)

    full = upload(full_gb) + download(full_gb)
    polls = egress.polling_traffic(workers, period_s, i.poll_interval_s)
    stored_gb = i.regions * i.retained_versions * full_gb
    if name not in DELTA_ROWS:
        return full + polls, full, stored_gb
    # A delta publication also carries a keyframe upload every keyframe_every versions;
    # workers that keep up never download it, but new ones start from one (``full``).
    delta_gb = i.delta_row_gb
    keyframe = upload(full_gb).times(1.0 / i.keyframe_every)
    per_pub = upload(delta_gb) + download(delta_gb) + keyframe + polls
    return per_pub, full, stored_gb + i.regions * i.keyframe_every * delta_gb


def chains(inputs: PlanInputs) -> int:
    if inputs.chains is not None:
        return inputs.chains
    return topology.chain_count(inputs.uplink_mbps, inputs.downlink_mbps)


def cdn_prices(inputs: PlanInputs, prices: PriceBook) -> CdnPrices | None:
    """The CDN in front of the bucket (``--cdn``, else the first the table lists for it)."""
    return prices.cdn_for(inputs.provider, inputs.cdn)


def topologies(inputs: PlanInputs, prices: PriceBook) -> tuple[str, ...]:
    """The rows this plan prices: the CDN rows only when a CDN fronts the provider."""
    if cdn_prices(inputs, prices) is None:
        return tuple(t for t in TOPOLOGIES if t not in CDN_ROWS)
    return TOPOLOGIES


def trainer_prices(inputs: PlanInputs, prices: PriceBook) -> StoragePrices | None:
    """Who bills the trainer's own egress; a storage-only provider cannot host it.

    Defaulting a trainer onto R2 or B2 would quietly price its uploads and
    pushes at their (zero or tiny) egress, so it is refused with the fix.
    """
    name = inputs.trainer_provider or inputs.provider
    if name == FLAT_RATE:
        return None
    trainer = prices.provider(name)
    if not trainer.hosts_compute:
        compute = ", ".join(k for k, v in sorted(prices.storage.items()) if v.hosts_compute)
        raise UsageError(
            f"{name} is storage only, so it cannot bill the trainer's egress; say where the "
            f"trainer runs with --trainer-provider ({compute}, or {FLAT_RATE})"
        )
    return trainer


@dataclass(frozen=True)
class RunCosts:
    """Everything a run pays besides GPUs, for one topology at one fleet size."""

    egress_usd_per_publication: float
    egress_usd_per_run: float
    requests_usd_per_run: float
    storage_usd_per_run: float


def run_costs(
    inputs: PlanInputs, prices: PriceBook, name: str, workers: int, step_s: float
) -> RunCosts:
    """Everything but GPUs, for a run of ``steps`` steps of ``step_s`` seconds."""
    i, run_s = inputs, step_s * inputs.steps
    per_pub, initial, stored_gb = traffic(i, name, workers, i.kappa * step_s)
    run = initial + per_pub.times(i.publications)
    storage = prices.provider(i.provider)
    cdn = cdn_prices(i, prices) if name in CDN_ROWS else None
    if name in CDN_ROWS and cdn is None:
        raise UsageError(f"{LABELS[name]}: no CDN fronts {i.provider!r} in the price table")
    pricing = egress.RunPricing(
        storage=storage,
        trainer=trainer_prices(i, prices),
        run_s=run_s,
        stored_gb=stored_gb,
        relay_usd_per_gb=i.relay_usd_per_gb,
        replica_regions=i.replica_regions,
        cdn=cdn,
        account_allowances=i.free_tier,
    )
    rates = egress.run_rates(run, pricing)
    return RunCosts(
        egress_usd_per_publication=egress.transfer_usd(per_pub, rates),
        egress_usd_per_run=egress.transfer_usd(run, rates),
        requests_usd_per_run=egress.requests_usd(run, rates),
        storage_usd_per_run=egress.storage_usd(stored_gb, storage, run_s),
    )
