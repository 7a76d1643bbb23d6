"""The combined estimate: capacity, broadcast time, egress and GPU cost per topology.

Fleet size and broadcast time depend on each other: a star's broadcast grows
with every worker it feeds, and every extra second of broadcast needs more
workers. :func:`size_fleet` finds the smallest fleet that covers the capacity
rule *at its own broadcast time* (the least fixed point), or reports that the
gate fires on the way there, which is exactly the star's failure mode.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..errors import InfeasiblePlanError, UsageError
from ..staleness import MAX_STABLE_STALENESS, MIN_STALENESS
from ..units import require_int, require_non_negative, require_positive
from . import capacity as cap
from . import egress, topology
from . import fleet as fleet_model
from .cdn import DEFAULT_EDGES, cdn_download_traffic
from .gpu import hourly_usd
from .prices import CdnPrices, PriceBook, StoragePrices

#: Topology names, in the order the report prints them.
TOPOLOGIES = (
    "object_storage_full", "object_storage_delta", "cdn_full", "cdn_delta", "star", "peer_chain",
)  # fmt: skip
LABELS = {
    "object_storage_full": "object storage full",
    "object_storage_delta": "object storage delta",
    "cdn_full": "CDN full",
    "cdn_delta": "CDN delta",
    "star": "star",
    "peer_chain": "peer chain",
}
#: Rows served through object storage (uploads, retained versions), with or without a CDN.
BUCKET_ROWS = ("object_storage_full", "object_storage_delta", "cdn_full", "cdn_delta")
CDN_ROWS = ("cdn_full", "cdn_delta")
DELTA_ROWS = ("object_storage_delta", "cdn_delta")
#: The trainer's link is bought flat (no per-GB egress), e.g. an on-premises uplink.
FLAT_RATE = "flat"
#: Give up sizing past this many workers: the answer is "no fleet", not a number.
MAX_WORKERS = 1_000_000


@dataclass(frozen=True)
class PlanInputs:
    """Everything one estimate depends on; validated on creation, never mutated."""

    params: float
    t_train_s: float
    batch: int
    bytes_per_param: float = 2.0
    density: float = 0.05
    staleness: int = MIN_STALENESS
    force: bool = False
    worker_rollouts_per_s: float = 0.33
    gamma: float = 1.1
    workers: int | None = None
    downlink_mbps: float = 100.0
    uplink_mbps: float = 300.0
    upload_mbps: float | None = None
    chunk_mb: float = 64.0
    provider: str = "aws"
    trainer_provider: str | None = None
    regions: int = 1
    replicate: bool = False
    replication_lag_s: float = 0.0
    steps: int = 100
    t_bcast_s: float | None = None
    trainer_gpus: tuple[tuple[str, int], ...] = (("A100-80GB", 4),)
    worker_gpu: str = "RTX-5090"
    relay_usd_per_gb: float = 0.0
    keyframe_every: int = 10
    retained_versions: int = 2
    poll_interval_s: float = 10.0
    cdn: str | None = None
    cdn_edges: int = DEFAULT_EDGES
    replica_regions: tuple[str, ...] = ()
    free_tier: bool = True
    # A heterogeneous fleet (--fleet / --from-status): T_bcast at bcast_fraction of it.
    fleet: fleet_model.FleetLinks | None = None
    bcast_fraction: float = 0.9
    install_mb_per_s: float = fleet_model.DEFAULT_INSTALL_MB_PER_S
    chains: int | None = None

    def __post_init__(self) -> None:
        topology.payload_gb(self.params, self.bytes_per_param, self.density)
        self._check_fleet()
        for name in ("t_train_s", "worker_rollouts_per_s", "downlink_mbps", "uplink_mbps"):
            require_positive(name, getattr(self, name))
        for name in ("chunk_mb", "poll_interval_s"):
            require_positive(name, getattr(self, name))
        for name in (
            "batch", "regions", "steps", "keyframe_every", "retained_versions", "cdn_edges",
        ):  # fmt: skip
            require_int(name, getattr(self, name))
        if self.replica_regions and self.regions != 1 + len(self.replica_regions):
            raise UsageError(
                f"regions must be 1 + the {len(self.replica_regions)} replica regions named, "
                f"got {self.regions} (leave --regions out when naming --replica-regions)"
            )
        require_non_negative("replication_lag_s", self.replication_lag_s)
        require_non_negative("relay_usd_per_gb", self.relay_usd_per_gb)
        if self.upload_mbps is not None:
            require_positive("upload_mbps", self.upload_mbps)
        if self.workers is not None:
            require_int("workers", self.workers)
        if self.t_bcast_s is not None:
            require_non_negative("t_bcast_s", self.t_bcast_s)
        cap.require_gamma(self.gamma)
        for gpu, count in self.trainer_gpus:
            require_int(f"trainer GPU count of {gpu}", count)
        cap.staleness_budget(staleness=self.staleness, force=self.force)

    def _check_fleet(self) -> None:
        fleet_model.quantile_index(1, self.bcast_fraction)
        require_positive("install_mb_per_s", self.install_mb_per_s)
        if self.chains is not None:
            require_int("chains", self.chains)
        if self.fleet is not None and self.workers != len(self.fleet):
            raise UsageError(f"workers must be the fleet's {len(self.fleet)}, got {self.workers}")

    @property
    def fetch(self) -> fleet_model.FetchModel:
        return fleet_model.FetchModel(self.poll_interval_s, install_mb_per_s=self.install_mb_per_s)

    @property
    def budget(self) -> cap.StalenessBudget:
        return cap.staleness_budget(staleness=self.staleness, force=self.force)

    @property
    def kappa(self) -> int:
        return self.staleness - 1

    @property
    def snapshot_gb(self) -> float:
        return topology.snapshot_gb(self.params, self.bytes_per_param)

    @property
    def delta_gb(self) -> float:
        return topology.payload_gb(self.params, self.bytes_per_param, self.density)

    @property
    def window_s(self) -> float:
        return self.kappa * self.t_train_s

    @property
    def publications(self) -> int:
        """Publications in the run: one every kappa steps."""
        return math.ceil(self.steps / self.kappa)


@dataclass(frozen=True)
class TopologyEstimate:
    """One topology at one fleet size: time, feasibility, money."""

    name: str
    payload_gb: float
    t_bcast_s: float
    feasible: bool
    fleet_workers: int
    workers_needed: int | None
    bubble_ratio: float
    step_s: float
    egress_usd_per_publication: float
    egress_usd_per_run: float
    requests_usd_per_run: float
    storage_usd_per_run: float
    gpu_usd_per_step: float
    total_usd_per_step: float

    def __post_init__(self) -> None:
        if self.name not in LABELS:
            raise UsageError(f"unknown topology {self.name!r}; known: {', '.join(TOPOLOGIES)}")
        if self.feasible != (self.workers_needed is not None):
            raise UsageError("workers_needed is set exactly when the topology is feasible")

    @property
    def label(self) -> str:
        return LABELS[self.name]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    """The headline sizing, every topology's row, and the recommendation with its reason."""

    inputs: PlanInputs
    t_bcast_s: float
    t_bcast_source: str
    slack_s: float
    required_pool_rollouts_per_s: float
    workers_needed: int
    by_topology: tuple[TopologyEstimate, ...]
    recommended: str
    reason: str
    prices_as_of: str
    price_entries: tuple[str, ...] = ()
    cdn_display: str | None = None
    warnings: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.recommended not in {t.name for t in self.by_topology}:
            raise UsageError(f"recommended topology {self.recommended!r} has no row")

    @property
    def feasible(self) -> bool:
        """Always true: an infeasible plan raises instead of being built."""
        return self.slack_s > 0

    def row(self, name: str) -> TopologyEstimate:
        return next(t for t in self.by_topology if t.name == name)

    def to_dict(self) -> dict[str, object]:
        i = self.inputs
        return {
            "kappa": i.kappa,
            "staleness": i.staleness,
            "snapshot_gb": i.snapshot_gb,
            "delta_gb": i.delta_gb,
            "density": i.density,
            "window_s": i.window_s,
            "floor_s": topology.star_unlimited_s(i.snapshot_gb, i.downlink_mbps),
            "t_bcast_s": self.t_bcast_s,
            "t_bcast_source": self.t_bcast_source,
            "slack_s": self.slack_s,
            "required_pool_rollouts_per_s": self.required_pool_rollouts_per_s,
            "workers_needed": self.workers_needed,
            "feasible": self.feasible,
            "steps": i.steps,
            "publications": i.publications,
            "provider": i.provider,
            "prices_as_of": self.prices_as_of,
            "price_entries": list(self.price_entries),
            "cdn": self.cdn_display,
            "recommended": self.recommended,
            "reason": self.reason,
            "warnings": list(self.warnings),
            "by_topology": {t.name: t.to_dict() for t in self.by_topology},
            "inputs": asdict(i),
        }


def t_bcast_model_s(inputs: PlanInputs, name: str, workers: int) -> float:
    """Modelled broadcast time of one topology at a fleet size."""
    i = inputs
    if i.fleet is not None:
        return fleet_t_bcast_s(i, name)
    if name in BUCKET_ROWS:
        payload = i.delta_gb if name in DELTA_ROWS else i.snapshot_gb
        return topology.object_storage_s(
            payload, i.downlink_mbps, i.upload_mbps or i.uplink_mbps,
            i.regions, i.replicate, i.replication_lag_s,
        )  # fmt: skip
    if name == "star":
        return topology.star_limited_s(i.snapshot_gb, i.uplink_mbps, i.downlink_mbps, workers)
    if name == "peer_chain":
        return topology.chain_pipelined_s(
            i.snapshot_gb, i.uplink_mbps, i.downlink_mbps, workers, i.chunk_mb
        )
    raise UsageError(f"unknown topology {name!r}; known: {', '.join(TOPOLOGIES)}")


def fleet_t_bcast_s(inputs: PlanInputs, name: str) -> float:
    """T_bcast at ``bcast_fraction`` of a heterogeneous fleet (cost/fleet.py).

    Bucket rows add the upload (and any replication lag) before the commit to the
    quantile of the workers' own times after it.
    """
    i, fleet = inputs, inputs.fleet
    if fleet is None:
        raise UsageError("fleet_t_bcast_s needs a fleet")
    f, fetch = i.bcast_fraction, i.fetch
    if name in BUCKET_ROWS:
        payload = i.delta_gb if name in DELTA_ROWS else i.snapshot_gb
        before_s = topology.object_storage_s(
            payload, i.downlink_mbps, i.upload_mbps or i.uplink_mbps,
            i.regions, i.replicate, i.replication_lag_s,
        ) - topology.transfer_s(payload, i.downlink_mbps)  # fmt: skip
        after_s = fleet_model.object_storage_fleet_s(fleet, payload, i.snapshot_gb, fetch, f)
        return before_s + after_s
    if name == "star":
        snapshot = i.snapshot_gb
        return fleet_model.star_fleet_s(fleet, snapshot, snapshot, i.uplink_mbps, fetch, f)
    if name == "peer_chain":
        return fleet_model.chain_fleet_s(
            fleet, i.snapshot_gb, i.snapshot_gb, i.uplink_mbps, fetch, f, i.chunk_mb, i.chains
        )
    raise UsageError(f"unknown topology {name!r}; known: {', '.join(TOPOLOGIES)}")


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
        need = cap.workers_needed(
            i.t_train_s, t_bcast, i.kappa, i.batch, i.worker_rollouts_per_s, i.gamma
        )
        if need <= fleet:
            return fleet, True
        fleet = need
    return MAX_WORKERS, False


def _traffic(
    inputs: PlanInputs, name: str, workers: int, period_s: float
) -> tuple[egress.Traffic, egress.Traffic, float]:
    """Per-publication traffic, the initial full distribution, and GB kept in storage."""
    i = inputs
    if name in ("star", "peer_chain"):
        trainer_copies = workers if name == "star" else min(workers, _chains(i))
        per_pub = egress.push_traffic(i.snapshot_gb, trainer_copies, workers - trainer_copies)
        return per_pub, per_pub, 0.0
    in_cloud = i.trainer_provider in (None, i.provider)

    def upload(gb: float) -> egress.Traffic:
        return egress.upload_traffic(gb, i.chunk_mb, i.regions, i.replicate, in_cloud)

    def download(gb: float) -> egress.Traffic:
        if name in CDN_ROWS:
            return cdn_download_traffic(gb, i.chunk_mb, workers, i.cdn_edges)
        return egress.download_traffic(gb, i.chunk_mb, workers)

    full = upload(i.snapshot_gb) + download(i.snapshot_gb)
    polls = egress.polling_traffic(workers, period_s, i.poll_interval_s)
    stored_gb = i.regions * i.retained_versions * i.snapshot_gb
    if name not in DELTA_ROWS:
        return full + polls, full, stored_gb
    # A delta publication also carries a keyframe upload every keyframe_every versions;
    # workers that keep up never download it, but new ones start from one (``full``).
    per_pub = (
        upload(i.delta_gb)
        + download(i.delta_gb)
        + upload(i.snapshot_gb).times(1.0 / i.keyframe_every)
        + polls
    )
    return per_pub, full, stored_gb + i.regions * i.keyframe_every * i.delta_gb


def _chains(inputs: PlanInputs) -> int:
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


def _trainer_prices(inputs: PlanInputs, prices: PriceBook) -> StoragePrices | None:
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
class _RunCosts:
    egress_usd_per_publication: float
    egress_usd_per_run: float
    requests_usd_per_run: float
    storage_usd_per_run: float


def _run_costs(
    inputs: PlanInputs, prices: PriceBook, name: str, workers: int, step_s: float
) -> _RunCosts:
    """Everything but GPUs, for a run of ``steps`` steps of ``step_s`` seconds."""
    i, run_s = inputs, step_s * inputs.steps
    per_pub, initial, stored_gb = _traffic(i, name, workers, i.kappa * step_s)
    run = initial + per_pub.times(i.publications)
    storage = prices.provider(i.provider)
    cdn = cdn_prices(i, prices) if name in CDN_ROWS else None
    if name in CDN_ROWS and cdn is None:
        raise UsageError(f"{LABELS[name]}: no CDN fronts {i.provider!r} in the price table")
    pricing = egress.RunPricing(
        storage=storage,
        trainer=_trainer_prices(i, prices),
        run_s=run_s,
        stored_gb=stored_gb,
        relay_usd_per_gb=i.relay_usd_per_gb,
        replica_regions=i.replica_regions,
        cdn=cdn,
        account_allowances=i.free_tier,
    )
    rates = egress.run_rates(run, pricing)
    return _RunCosts(
        egress_usd_per_publication=egress.transfer_usd(per_pub, rates),
        egress_usd_per_run=egress.transfer_usd(run, rates),
        requests_usd_per_run=egress.requests_usd(run, rates),
        storage_usd_per_run=egress.storage_usd(stored_gb, storage, run_s),
    )


def evaluate(inputs: PlanInputs, prices: PriceBook, name: str, workers: int) -> TopologyEstimate:
    """Price one topology at one fleet size, stretching the step by any learner bubble."""
    i = inputs
    t_bcast = t_bcast_model_s(i, name, workers)
    feasible = cap.is_feasible(i.t_train_s, t_bcast, i.kappa)
    pool = workers * i.worker_rollouts_per_s
    bubble = cap.bubble_ratio(i.t_train_s, t_bcast, i.kappa, i.batch, pool)
    step_s = cap.step_s_at_pool(i.t_train_s, t_bcast, i.kappa, i.batch, pool)
    costs = _run_costs(i, prices, name, workers, step_s)
    fleet = dict(i.trainer_gpus)
    fleet[i.worker_gpu] = fleet.get(i.worker_gpu, 0) + workers
    gpu_step = hourly_usd(fleet, prices.gpu_usd_per_hour) * step_s / 3600.0
    other_run = costs.egress_usd_per_run + costs.requests_usd_per_run + costs.storage_usd_per_run
    needed = None
    if feasible:
        needed = cap.workers_needed(
            i.t_train_s, t_bcast, i.kappa, i.batch, i.worker_rollouts_per_s, i.gamma
        )
    return TopologyEstimate(
        name=name,
        payload_gb=i.delta_gb if name in DELTA_ROWS else i.snapshot_gb,
        t_bcast_s=t_bcast,
        feasible=feasible,
        fleet_workers=workers,
        workers_needed=needed,
        bubble_ratio=bubble,
        step_s=step_s,
        gpu_usd_per_step=gpu_step,
        total_usd_per_step=gpu_step + other_run / i.steps,
        **asdict(costs),
    )


def infeasible_error(
    inputs: PlanInputs, t_bcast_s: float, fastest: str | None = None
) -> InfeasiblePlanError:
    """The gate's message plus the two concrete fixes: a larger kappa, or a delta.

    ``fastest`` names the modelled topology the broadcast time comes from; None
    means the time was measured, and then a delta is assumed to shrink it in
    proportion to the bytes it ships.
    """
    i = inputs
    try:
        cap.slack_s(i.t_train_s, t_bcast_s, i.kappa)
    except InfeasiblePlanError as exc:
        message = str(exc)
    else:
        raise UsageError("infeasible_error called on a feasible broadcast")
    if fastest is not None:
        message += f" (fastest topology: {LABELS[fastest]})"
    kappa = cap.min_feasible_kappa(i.t_train_s, t_bcast_s)
    message += f"; fix: --kappa {kappa} (S={kappa + 1}"
    message += ", outside the stable envelope)" if kappa + 1 > MAX_STABLE_STALENESS else ")"
    density = i.window_s / t_bcast_s if fastest is None else _max_feasible_density(i)
    if density is not None:
        message += f", or ship deltas at --density below {100 * density:.3g}%"
    return InfeasiblePlanError(message)


def _max_feasible_density(inputs: PlanInputs) -> float | None:
    """Largest delta density whose object-storage broadcast still fits the window.

    Object-storage time is affine in the payload, so one division solves it.
    """
    i = inputs
    lag_s = i.replication_lag_s if i.replicate and i.regions > 1 else 0.0
    full_s = t_bcast_model_s(i, "object_storage_full", 1) - lag_s
    room_s = i.window_s - lag_s
    return min(1.0, room_s / full_s) if room_s > 0 else None


def _recommend(rows: tuple[TopologyEstimate, ...], window_s: float) -> tuple[str, str]:
    ok = sorted((r for r in rows if r.feasible), key=lambda r: (r.total_usd_per_step, r.t_bcast_s))
    best = ok[0]
    reason = (
        f"{best.label} is the cheapest feasible topology at ${best.total_usd_per_step:,.2f}/step"
    )
    if len(ok) > 1:
        reason += f" (next: {ok[1].label} at ${ok[1].total_usd_per_step:,.2f}/step)"
    blocked = [r.label for r in rows if not r.feasible]
    if blocked:
        reason += (
            f"; {' and '.join(blocked)} cannot fit the broadcast in kappa*T_train = "
            f"{window_s:.0f} s"
        )
    return best.name, reason


def estimate(inputs: PlanInputs, prices: PriceBook) -> Plan:
    """Size, time and price every topology; raise :class:`InfeasiblePlanError` if none fits.

    With a measured ``t_bcast_s`` the headline sizing uses it (the user knows
    their network better than the model); the rows stay modelled so the
    topologies can still be compared.
    """
    i = inputs
    rows = tuple(
        evaluate(i, prices, name, i.workers or size_fleet(i, name)[0])
        for name in topologies(i, prices)
    )
    if i.t_bcast_s is None and not any(r.feasible for r in rows):
        fastest = min(rows, key=lambda r: r.t_bcast_s)
        raise infeasible_error(i, fastest.t_bcast_s, fastest.name)
    if i.t_bcast_s is not None and not cap.is_feasible(i.t_train_s, i.t_bcast_s, i.kappa):
        raise infeasible_error(i, i.t_bcast_s)
    recommended, reason = _recommend(rows, i.window_s)
    if i.t_bcast_s is None:
        t_bcast, source = next(r.t_bcast_s for r in rows if r.name == recommended), recommended
    else:
        t_bcast, source = i.t_bcast_s, "measured"
    return Plan(
        inputs=i,
        t_bcast_s=t_bcast,
        t_bcast_source=source,
        slack_s=cap.slack_s(i.t_train_s, t_bcast, i.kappa),
        required_pool_rollouts_per_s=cap.required_pool_rollouts_per_s(
            i.t_train_s, t_bcast, i.kappa, i.batch
        ),
        workers_needed=cap.workers_needed(
            i.t_train_s, t_bcast, i.kappa, i.batch, i.worker_rollouts_per_s, i.gamma
        ),
        by_topology=rows,
        recommended=recommended,
        reason=reason,
        prices_as_of=prices.provider(i.provider).provenance.read_on.isoformat(),
        price_entries=price_entries(i, prices),
        cdn_display=_cdn_display(i, prices),
        warnings=_warnings(i, rows),
    )


def price_entries(inputs: PlanInputs, prices: PriceBook) -> tuple[str, ...]:
    """Keys of the price-table entries this estimate used, for the staleness check."""
    i, used = inputs, [f"storage.{inputs.provider}"]
    trainer = i.trainer_provider or i.provider
    if trainer not in (FLAT_RATE, i.provider):
        used.append(f"storage.{trainer}")
    cdn = cdn_prices(i, prices)
    if cdn is not None:
        used.append(f"cdns.{cdn.name}")
    return (*used, "gpus")


def _cdn_display(inputs: PlanInputs, prices: PriceBook) -> str | None:
    cdn = cdn_prices(inputs, prices)
    return None if cdn is None else cdn.display


def _warnings(inputs: PlanInputs, rows: tuple[TopologyEstimate, ...]) -> tuple[str, ...]:
    found = [inputs.budget.warning] if inputs.budget.warning else []
    for r in rows:
        if r.feasible and r.workers_needed is not None and r.fleet_workers < r.workers_needed:
            found.append(
                f"{r.label}: {r.fleet_workers} workers is below the {r.workers_needed} needed; "
                f"the learner idles {r.bubble_ratio:.1%} of the time"
            )
    return tuple(found)


def sweep(
    inputs: PlanInputs, prices: PriceBook, name: str, fleet_sizes: range
) -> list[TopologyEstimate]:
    """One topology across fleet sizes: the data behind the plot."""
    return [evaluate(inputs, prices, name, n) for n in fleet_sizes]
