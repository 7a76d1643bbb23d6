"""Broadcast time per topology for one :class:`~wanrl_s3.cost.inputs.PlanInputs`.

A bucket row is three terms in sequence, because the commit protocol makes a
version visible only when whole: **publish** (the trainer uploads the payload to
every region's bucket, then commits), **replicate** (the provider's lag, with
``replicate``), **pull** (each worker at its own downlink, or the fleet's
quantile). The star and the chain have no publication apart from the broadcast:
the trainer's push is the broadcast.

Every topology ships the same bytes for a full version: the snapshot coded at
``full_ratio`` (:mod:`.publication`). Installing always touches the raw snapshot.
"""

from __future__ import annotations

from ..errors import UsageError
from . import capacity as cap
from . import fleet as fleet_model
from . import topology
from .cdn import cdn_read_s
from .inputs import BUCKET_ROWS, CDN_ROWS, DELTA_ROWS, MAX_WORKERS, TOPOLOGIES, PlanInputs


def row_payload_gb(inputs: PlanInputs, name: str) -> float:
    """Bytes one publication of row ``name`` ships: a delta, or a coded full version."""
    return inputs.delta_row_gb if name in DELTA_ROWS else inputs.full_gb


def publish_s(inputs: PlanInputs, payload_gb: float) -> float:
    """The publish term of a bucket row: the upload to every region bucket, then the commit.

    Without ``trainer_uplink_gbps`` it is one upload at ``upload_mbps`` (default
    the trainer's uplink) and no commit time, as the reference page models it.
    """
    i = inputs
    copies = 1 if i.replicate else i.regions
    uplink = i.trainer_uplink
    if uplink is None:
        return topology.transfer_s(payload_gb * copies, i.upload_mbps or i.uplink_mbps)
    return uplink.publish_s(payload_gb, copies)


def bucket_s(inputs: PlanInputs, payload_gb: float, delta: bool = False) -> float:
    """Publish, replicate, then pull: a bucket row's T_bcast for ``payload_gb``."""
    i = inputs
    lag_s = i.replication_lag_s if i.replicate and i.regions > 1 else 0.0
    before_s = publish_s(i, payload_gb) + lag_s
    if i.fleet is None:
        return before_s + topology.star_unlimited_s(payload_gb, i.downlink_mbps)
    return before_s + fleet_model.object_storage_fleet_s(
        i.fleet, payload_gb, i.snapshot_gb, i.fetch, i.bcast_fraction, delta
    )


def cdn_s(inputs: PlanInputs, workers: int) -> float:
    """What the edges add to a bucket row's T_bcast at a fleet size (cdn.py; may be < 0)."""
    i = inputs
    size = len(i.fleet) if i.fleet is not None else workers
    return cdn_read_s(i.cdn_fill_rtt_ms / 1e3, i.store_answer_ms / 1e3, size, i.cdn_edges)


def t_bcast_model_s(inputs: PlanInputs, name: str, workers: int) -> float:
    """Modelled broadcast time of one topology at a fleet size (a fleet file fixes the size)."""
    i = inputs
    measured = dict(i.measured_t_bcast_s)
    if name in measured:
        return measured[name]
    if name in BUCKET_ROWS:
        through_s = cdn_s(i, workers) if name in CDN_ROWS else 0.0
        return bucket_s(i, row_payload_gb(i, name), delta=name in DELTA_ROWS) + through_s
    full, fleet = i.full_gb, i.fleet
    if name == "star" and fleet is None:
        return topology.star_limited_s(full, i.uplink_mbps, i.downlink_mbps, workers)
    if name == "star" and fleet is not None:
        f = i.bcast_fraction
        return fleet_model.star_fleet_s(fleet, full, i.snapshot_gb, i.uplink_mbps, i.fetch, f)
    if name == "peer_chain" and fleet is None:
        return topology.chain_pipelined_s(full, i.uplink_mbps, i.downlink_mbps, workers, i.chunk_mb)
    if name == "peer_chain" and fleet is not None:
        return fleet_model.chain_fleet_s(
            fleet, full, i.snapshot_gb, i.uplink_mbps, i.fetch, i.bcast_fraction, i.chunk_mb,
            i.chains,
        )  # fmt: skip
    raise UsageError(f"unknown topology {name!r}; known: {', '.join(TOPOLOGIES)}")


def workers_needed_at(inputs: PlanInputs, t_bcast_s: float) -> int:
    """The capacity rule's fleet for these inputs at a broadcast time (drops included)."""
    i = inputs
    return cap.workers_needed(
        i.t_train_s, t_bcast_s, i.kappa, i.batch, i.worker_rollouts_per_s, i.gamma,
        dropped_fraction=i.dropped_fraction,
    )  # fmt: skip


def size_fleet(inputs: PlanInputs, name: str) -> tuple[int, bool]:
    """Smallest fleet N with workers_needed(T_bcast(N)) <= N, and whether it exists.

    Both maps are non-decreasing, so iterating N -> needed(T(N)) from N = 1
    climbs to the least fixed point; if the gate fires first, that N is
    returned with ``False`` so the caller can show what the attempt cost.
    """
    i, fleet = inputs, 1
    while fleet <= MAX_WORKERS:
        t_bcast = t_bcast_model_s(i, name, fleet)
        if not cap.is_feasible(i.t_train_s, t_bcast, i.kappa):
            return fleet, False
        need = workers_needed_at(i, t_bcast)
        if need <= fleet:
            return fleet, True
        fleet = need
    return MAX_WORKERS, False


def max_feasible_density(inputs: PlanInputs) -> float | None:
    """Largest delta density whose bucket broadcast still fits the window, or None.

    A bucket row's time is affine in its payload (fixed terms: the commit, the
    replication lag, a fleet's polls and installs), so its value at no payload
    and at the raw snapshot solve it. Density is a fraction of the raw snapshot.
    """
    i = inputs
    fixed_s = bucket_s(i, 0.0)
    per_snapshot_s = bucket_s(i, i.snapshot_gb) - fixed_s
    room_s = i.window_s - fixed_s
    return min(1.0, room_s / per_snapshot_s) if room_s > 0 else None
