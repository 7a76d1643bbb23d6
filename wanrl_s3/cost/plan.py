"""The combined estimate: capacity, broadcast time, egress and GPU cost per topology.

Fleet size and broadcast time depend on each other: a star's broadcast grows
with every worker it feeds, and every extra second of broadcast needs more
workers. :func:`size_fleet` finds the smallest fleet that covers the capacity
rule *at its own broadcast time* (the least fixed point), or reports that the
gate fires on the way there, which is exactly the star's failure mode.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import InfeasiblePlanError, UsageError
from ..staleness import MAX_STABLE_STALENESS
from ..units import count
from . import capacity as cap
from . import topology
from .gpu import hourly_usd
from .inputs import BUCKET_ROWS, FLAT_RATE, LABELS, SHIPPED_ROWS, TOPOLOGIES, UNSHIPPED, PlanInputs
from .prices import PriceBook
from .timing import (
    max_feasible_density,
    publish_s,
    row_payload_gb,
    size_fleet,
    t_bcast_model_s,
    workers_needed_at,
)
from .traffic import cdn_prices, run_costs, topologies


@dataclass(frozen=True)
class TopologyEstimate:
    """One topology at one fleet size: time, feasibility, money."""

    name: str
    payload_gb: float
    t_bcast_s: float
    # The part of t_bcast_s before the version is visible: the trainer's upload and
    # commit (bucket rows only; for the star and the chain the push is the broadcast).
    publish_s: float
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
    shipped: bool  # a route wanrl-s3 ships (SHIPPED_ROWS); the others are modelled only

    def __post_init__(self) -> None:
        if self.name not in LABELS:
            raise UsageError(f"unknown topology {self.name!r}; known: {', '.join(TOPOLOGIES)}")
        if self.feasible != (self.workers_needed is not None):
            raise UsageError("workers_needed is set exactly when the topology is feasible")

    @property
    def label(self) -> str:
        """The topology's name for people (the table's row heading)."""
        return LABELS[self.name]

    def to_dict(self) -> dict[str, object]:
        """Every field by name (one row of ``estimate --json``)."""
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
        """The row of topology ``name``; raises StopIteration when the plan has no such row."""
        return next(t for t in self.by_topology if t.name == name)

    def to_dict(self) -> dict[str, object]:
        """The plan as ``estimate --json`` prints it: headline sizing, inputs, and every row."""
        i = self.inputs
        return {
            "kappa": i.kappa,
            "staleness": i.staleness,
            "snapshot_gb": i.snapshot_gb,
            "full_ratio": i.full_ratio,
            "full_gb": i.full_gb,
            "delta_gb": i.delta_gb,
            "density": i.density,
            "window_s": i.window_s,
            "floor_s": topology.star_unlimited_s(i.full_gb, i.downlink_mbps),
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
            "include_unshipped": i.include_unshipped,
            "reason": self.reason,
            "warnings": list(self.warnings),
            "by_topology": {t.name: t.to_dict() for t in self.by_topology},
            "inputs": asdict(i),
        }


def evaluate(inputs: PlanInputs, prices: PriceBook, name: str, workers: int) -> TopologyEstimate:
    """Price one topology at one fleet size, stretching the step by any learner bubble."""
    i = inputs
    t_bcast = t_bcast_model_s(i, name, workers)
    payload_gb = row_payload_gb(i, name)
    feasible = cap.is_feasible(i.t_train_s, t_bcast, i.kappa)
    pool = workers * i.worker_rollouts_per_s
    drops = {"dropped_fraction": i.dropped_fraction}
    bubble = cap.bubble_ratio(i.t_train_s, t_bcast, i.kappa, i.batch, pool, **drops)
    step_s = cap.step_s_at_pool(i.t_train_s, t_bcast, i.kappa, i.batch, pool, **drops)
    costs = run_costs(i, prices, name, workers, step_s)
    fleet = dict(i.trainer_gpus)
    fleet[i.worker_gpu] = fleet.get(i.worker_gpu, 0) + workers
    gpu_step = hourly_usd(fleet, prices.gpu_usd_per_hour) * step_s / 3600.0
    other_run = costs.egress_usd_per_run + costs.requests_usd_per_run + costs.storage_usd_per_run
    needed = None
    if feasible:
        needed = workers_needed_at(i, t_bcast)
    return TopologyEstimate(
        name=name,
        payload_gb=payload_gb,
        t_bcast_s=t_bcast,
        publish_s=publish_s(i, payload_gb) if name in BUCKET_ROWS else 0.0,
        feasible=feasible,
        fleet_workers=workers,
        workers_needed=needed,
        bubble_ratio=bubble,
        step_s=step_s,
        gpu_usd_per_step=gpu_step,
        total_usd_per_step=gpu_step + other_run / i.steps,
        shipped=name in SHIPPED_ROWS,
        **asdict(costs),
    )


def infeasible_error(
    inputs: PlanInputs, t_bcast_s: float, fastest: str | None = None
) -> InfeasiblePlanError:
    """The gate's message plus the two concrete fixes: a larger kappa, or a delta.

    ``fastest`` names the modelled topology the broadcast time comes from; None
    means the time was measured (of a full version, ``full_ratio`` of the raw
    snapshot), and then a delta is assumed to shrink it in proportion to the bytes
    it ships.
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
    density = i.full_ratio * i.window_s / t_bcast_s if fastest is None else max_feasible_density(i)
    if density is not None:
        message += f", or ship deltas at --density below {100 * density:.3g}%"
    return InfeasiblePlanError(message)


def _recommend(
    rows: tuple[TopologyEstimate, ...], window_s: float, include_unshipped: bool
) -> tuple[str, str]:
    """The cheapest feasible ranked row, and why; only shipped rows are ranked unless asked."""
    kind = "topology" if include_unshipped else "topology wanrl-s3 ships"
    ranked = [r for r in rows if r.shipped or include_unshipped]
    ok = sorted(
        (r for r in ranked if r.feasible), key=lambda r: (r.total_usd_per_step, r.t_bcast_s)
    )
    if not ok:  # only a measured T_bcast (--t-bcast-s) fits: the model has no feasible row
        fastest = min(ranked, key=lambda r: r.t_bcast_s)
        return fastest.name, (
            f"no {kind} fits kappa*T_train = {window_s:.0f} s in the model, though the measured "
            f"T_bcast does; {fastest.label} is the fastest modelled ({fastest.t_bcast_s:.0f} s)"
        )
    best = ok[0]
    reason = f"{best.label} is the cheapest feasible {kind} at ${best.total_usd_per_step:,.2f}/step"
    if len(ok) > 1:
        reason += f" (next: {ok[1].label} at ${ok[1].total_usd_per_step:,.2f}/step)"
    cheaper = [
        r
        for r in rows
        if r.feasible and r not in ok and r.total_usd_per_step < best.total_usd_per_step
    ]
    for r in cheaper:
        reason += (
            f"; {r.label} ({UNSHIPPED}) would cost ${r.total_usd_per_step:,.2f}/step: "
            "--include-unshipped ranks it"
        )
    blocked = [r.label for r in rows if not r.feasible]
    if blocked:
        reason += (
            f"; {' and '.join(blocked)} cannot fit the broadcast in kappa*T_train = "
            f"{window_s:.0f} s"
        )
    return best.name, reason


def _unshipped_fit(inputs: PlanInputs, rows: tuple[TopologyEstimate, ...]) -> str:
    """What the gate's message adds when only a route wanrl-s3 does not ship would fit."""
    fits = [r.label for r in rows if r.feasible and not r.shipped]
    if not fits or inputs.include_unshipped:
        return ""
    return (
        f"; {' and '.join(fits)} ({UNSHIPPED}) would fit: --include-unshipped ranks "
        f"{'it' if len(fits) == 1 else 'them'}"
    )


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
    ranked = tuple(r for r in rows if r.shipped or i.include_unshipped)
    if i.t_bcast_s is None and not any(r.feasible for r in ranked):
        fastest = min(ranked, key=lambda r: r.t_bcast_s)
        error = infeasible_error(i, fastest.t_bcast_s, fastest.name)
        raise InfeasiblePlanError(f"{error}{_unshipped_fit(i, rows)}")
    if i.t_bcast_s is not None and not cap.is_feasible(i.t_train_s, i.t_bcast_s, i.kappa):
        raise infeasible_error(i, i.t_bcast_s)
    recommended, reason = _recommend(rows, i.window_s, i.include_unshipped)
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
            i.t_train_s, t_bcast, i.kappa, i.batch, dropped_fraction=i.dropped_fraction
        ),
        workers_needed=workers_needed_at(i, t_bcast),
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
                f"{r.label}: a fleet of {count(r.fleet_workers, 'worker')} is smaller than the "
                f"{r.workers_needed} needed; the learner idles {r.bubble_ratio:.1%} of the time"
            )
    return tuple(found)


def sweep(
    inputs: PlanInputs, prices: PriceBook, name: str, fleet_sizes: range
) -> list[TopologyEstimate]:
    """One topology across fleet sizes: the data behind the plot."""
    return [evaluate(inputs, prices, name, n) for n in fleet_sizes]
