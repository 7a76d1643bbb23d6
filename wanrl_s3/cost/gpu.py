"""GPU cost: what a step costs, when offloading stops paying, and which workers to rent.

Offloading rollout trades a cheaper tier for a longer step; only the product
matters, so the useful outputs are budgets (the longest affordable step, the
largest affordable fleet), not price ratios.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import InfeasiblePlanError, UsageError
from ..units import require_int, require_non_negative, require_positive

#: A fleet: GPU model name -> how many of it.
Fleet = Mapping[str, int]


def hourly_usd(fleet: Fleet, usd_per_hour: Mapping[str, float]) -> float:
    """Dollars per hour of a fleet, naming any GPU the price list does not know."""
    total = 0.0
    for gpu, count in fleet.items():
        if gpu not in usd_per_hour:
            known = ", ".join(sorted(usd_per_hour))
            raise UsageError(f"unknown GPU {gpu!r}; known: {known}")
        total += usd_per_hour[gpu] * require_int(f"count of {gpu}", count, minimum=0)
    return total


def cost_per_step_usd(fleet: Fleet, step_s: float, usd_per_hour: Mapping[str, float]) -> float:
    """GPU dollars one learner step costs at the given wall-clock step length."""
    return hourly_usd(fleet, usd_per_hour) * require_positive("step_s", step_s) / 3600.0


def break_even_step_s(
    base_fleet: Fleet, base_step_s: float, new_fleet: Fleet, usd_per_hour: Mapping[str, float]
) -> float:
    """Longest step the new layout may take and still cost no more per step than the base."""
    new_hourly = require_positive("new fleet hourly price", hourly_usd(new_fleet, usd_per_hour))
    return (
        require_positive("base_step_s", base_step_s)
        * hourly_usd(base_fleet, usd_per_hour)
        / new_hourly
    )


def break_even_workers(
    baseline_usd_per_hour: float, fixed_usd_per_hour: float, worker_usd_per_hour: float
) -> float:
    """Workers at which (fixed part + workers) costs exactly the baseline per hour.

    The saving of a cheap tier is bought by worker count, so it inverts past
    this number; a fractional answer means the whole number above it loses.
    """
    return (baseline_usd_per_hour - fixed_usd_per_hour) / require_positive(
        "worker_usd_per_hour", worker_usd_per_hour
    )


def saving_fraction(base_usd: float, new_usd: float) -> float:
    """1 - new / base: positive is a saving, negative a loss."""
    return 1.0 - new_usd / require_positive("base_usd", base_usd)


@dataclass(frozen=True)
class WorkerOffer:
    """A rentable worker: its price and its measured rollout rate."""

    name: str
    usd_per_hour: float
    rollouts_per_s: float

    def __post_init__(self) -> None:
        require_non_negative(f"worker {self.name!r} usd_per_hour", self.usd_per_hour)
        require_positive(f"worker {self.name!r} rollouts_per_s", self.rollouts_per_s)

    @property
    def rho(self) -> float:
        """Dollars per hour per rollout/s: the cost-aware scheduling key."""
        return self.usd_per_hour / self.rollouts_per_s


@dataclass(frozen=True)
class Activation:
    """The workers chosen, and what they deliver and cost together."""

    workers: tuple[WorkerOffer, ...]
    rollouts_per_s: float
    usd_per_hour: float


def activate_cheapest(
    offers: Iterable[WorkerOffer], required_rollouts_per_s: float, gamma: float = 1.1
) -> Activation:
    """Sort by rho and take the shortest prefix that clears gamma times the requirement.

    Ranking by throughput instead keeps the fleet size and pays more per step;
    on a homogeneous pool this reduces to counting nodes. Ties go to the faster
    worker, so fewer machines carry the same capacity.
    """
    target = require_positive("gamma", gamma) * require_positive(
        "required_rollouts_per_s", required_rollouts_per_s
    )
    ranked = sorted(offers, key=lambda o: (o.rho, -o.rollouts_per_s, o.name))
    chosen: list[WorkerOffer] = []
    rate = 0.0
    for offer in ranked:
        if rate >= target:
            break
        chosen.append(offer)
        rate += offer.rollouts_per_s
    if rate < target:
        raise InfeasiblePlanError(
            f"the pool's {len(ranked)} workers deliver {rate:.3f} rollouts/s, short of "
            f"gamma x required = {target:.3f}; add workers, or raise kappa (and S)"
        )
    return Activation(tuple(chosen), rate, sum(o.usd_per_hour for o in chosen))
