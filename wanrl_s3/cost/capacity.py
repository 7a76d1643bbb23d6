"""The capacity rule: how much rollout throughput keeps the learner busy.

One publication period of ``kappa`` training steps has to cover both the
broadcast of the new policy and the generation of the ``kappa * batch``
trajectories the learner consumes in it::

    kappa * T_train  >=  T_bcast + kappa * batch / pool_rate

Rearranged, that gives the aggregate pool rate the fleet must sustain, and a
hard gate: when the broadcast alone does not fit in the window, no pool rate
removes the learner bubble, so we refuse to size a fleet at all.

The rule counts every trajectory the pool generates as usable. The staleness
filter drops those that arrive too old, a fraction ``d`` of what reaches the
learner (measured by its counters, or modelled), so only ``(1 - d) * pool_rate``
feeds the learner: the rule is applied to that usable rate, and the pool rate
and fleet it asks for grow by ``1 / (1 - d)``. At ``d = 0`` every figure is the
rule's own, to the last bit (docs/sizing-and-cost.md has the derivation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InfeasiblePlanError, UsageError
from ..staleness import MIN_STALENESS, check_staleness, kappa_for_staleness, stability_warning
from ..units import require_int, require_non_negative, require_positive


def require_gamma(gamma: float) -> float:
    """gamma is spare capacity: below 1 the fleet would be sized to stall, so it is refused."""
    if not (isinstance(gamma, (int, float)) and math.isfinite(gamma) and gamma >= 1.0):
        raise UsageError(f"gamma is an overprovision factor and must be >= 1.0, got {gamma!r}")
    return float(gamma)


@dataclass(frozen=True)
class StalenessBudget:
    """The staleness budget S and the publication interval kappa = S - 1 it implies.

    ``warning`` is set, not raised, when S is usable but outside the measured
    stability envelope: the run may still be right for an objective that
    corrects for stale data, so the caller decides whether to print it.
    """

    staleness: int
    kappa: int
    warning: str | None = None

    def __post_init__(self) -> None:
        require_int("staleness", self.staleness, minimum=2)
        if self.kappa != self.staleness - 1:
            raise UsageError(
                f"kappa must be staleness - 1 = {self.staleness - 1}, got {self.kappa}"
            )


def staleness_budget(
    *, staleness: int | None = None, kappa: int | None = None, force: bool = False
) -> StalenessBudget:
    """Resolve S or kappa (not both) into a budget, applying the S >= 3 default rule.

    S < 3 means kappa < 2: the published rule needs at least two steps per
    publication, so we refuse unless ``force``. S > 6 left the stable envelope
    in the published sweep, so it only earns a warning.
    """
    if staleness is not None and kappa is not None:
        raise UsageError("give either staleness or kappa, not both (kappa = staleness - 1)")
    if kappa is not None:
        staleness = require_int("kappa", kappa) + 1
    staleness = check_staleness(
        MIN_STALENESS if staleness is None else staleness, force=force, fix="pass --force"
    )
    return StalenessBudget(
        staleness=staleness,
        kappa=kappa_for_staleness(staleness),
        warning=stability_warning(staleness),
    )


def require_dropped_fraction(dropped_fraction: float) -> float:
    """d, the share of what reaches the learner that it drops as too old: in [0, 1).

    At 1 nothing is ever admitted, and no pool rate feeds the learner.
    """
    d = dropped_fraction
    if isinstance(d, bool) or not (isinstance(d, (int, float)) and 0.0 <= d < 1.0):
        raise UsageError(
            "dropped_fraction is the share of trajectories the staleness filter drops as "
            f"too old and must be in [0, 1), got {dropped_fraction!r}"
        )
    return float(d)


def usable_rollouts_per_s(pool_rollouts_per_s: float, dropped_fraction: float = 0.0) -> float:
    """What the learner admits of the pool's rate: ``(1 - d) * pool`` (exactly the pool at 0)."""
    require_positive("pool_rollouts_per_s", pool_rollouts_per_s)
    return pool_rollouts_per_s * (1.0 - require_dropped_fraction(dropped_fraction))


def _check_inputs(t_train_s: float, t_bcast_s: float, kappa: int) -> None:
    require_positive("t_train_s", t_train_s)
    require_non_negative("t_bcast_s", t_bcast_s)
    require_int("kappa", kappa)


def is_feasible(t_train_s: float, t_bcast_s: float, kappa: int) -> bool:
    """The gate as a predicate: the broadcast must fit strictly inside kappa steps."""
    _check_inputs(t_train_s, t_bcast_s, kappa)
    return kappa * t_train_s > t_bcast_s


def _seconds(value_s: float) -> str:
    """Whole seconds from 10 s up (the page's format), two significant digits below, so a
    sub-second broadcast never reads as '1s does not fit in 1s'."""
    return f"{value_s:.0f}" if value_s >= 10 else f"{value_s:.2g}"


def slack_s(t_train_s: float, t_bcast_s: float, kappa: int) -> float:
    """Seconds of the publication window left for generation once the broadcast is in.

    Raises :class:`InfeasiblePlanError` (the gate) when there are none, because
    every formula downstream divides by this number.
    """
    if not is_feasible(t_train_s, t_bcast_s, kappa):
        raise InfeasiblePlanError(
            f"infeasible: broadcast {_seconds(t_bcast_s)}s does not fit in kappa*T_train "
            f"= {_seconds(kappa * t_train_s)}s; raise kappa (and S), or cut T_bcast"
        )
    return kappa * t_train_s - t_bcast_s


def required_pool_rollouts_per_s(
    t_train_s: float, t_bcast_s: float, kappa: int, batch: int, *, dropped_fraction: float = 0.0
) -> float:
    """Aggregate rollouts/s the active pool must sustain: kappa * batch over the slack, over
    the share ``1 - dropped_fraction`` of them that the learner admits."""
    require_int("batch", batch)
    usable_share = 1.0 - require_dropped_fraction(dropped_fraction)
    return kappa * batch / slack_s(t_train_s, t_bcast_s, kappa) / usable_share


def workers_needed(
    t_train_s: float,
    t_bcast_s: float,
    kappa: int,
    batch: int,
    worker_rollouts_per_s: float,
    gamma: float = 1.1,
    *,
    dropped_fraction: float = 0.0,
) -> int:
    """Uniform workers for the required rate times the overprovision ``gamma``.

    gamma >= 1 is spare capacity that absorbs a single worker fault without
    reconfiguring (the published default is 1.1).
    """
    require_positive("worker_rollouts_per_s", worker_rollouts_per_s)
    require_gamma(gamma)
    rate = required_pool_rollouts_per_s(
        t_train_s, t_bcast_s, kappa, batch, dropped_fraction=dropped_fraction
    )
    return math.ceil(gamma * rate / worker_rollouts_per_s)


def bubble_ratio(
    t_train_s: float,
    t_bcast_s: float,
    kappa: int,
    batch: int,
    pool_rollouts_per_s: float,
    *,
    dropped_fraction: float = 0.0,
) -> float:
    """Fraction of wall clock the learner idles when the pool runs at the given rate.

    At or above the required rate the answer is exactly 0.0: we compare rates
    rather than subtract times, so rounding can never invent a tiny bubble.
    Infeasible inputs are allowed here; they simply report a large bubble.
    """
    idle_s = _idle_s(t_train_s, t_bcast_s, kappa, batch, pool_rollouts_per_s, dropped_fraction)
    return idle_s / (idle_s + kappa * t_train_s)


def step_s_at_pool(
    t_train_s: float,
    t_bcast_s: float,
    kappa: int,
    batch: int,
    pool_rollouts_per_s: float,
    *,
    dropped_fraction: float = 0.0,
) -> float:
    """Wall-clock seconds per learner step: T_train, stretched by any bubble.

    ``T_train / (1 - bubble)`` written as ``T_train * (idle + window) / window``:
    the same number, but a bubble that rounds to 1.0 (a broadcast of 1e21 s
    against a 120 s window) cannot divide by zero.
    """
    idle_s = _idle_s(t_train_s, t_bcast_s, kappa, batch, pool_rollouts_per_s, dropped_fraction)
    window_s = kappa * t_train_s
    return t_train_s * (idle_s + window_s) / window_s


def _idle_s(
    t_train_s: float,
    t_bcast_s: float,
    kappa: int,
    batch: int,
    pool_rollouts_per_s: float,
    dropped_fraction: float,
) -> float:
    """Seconds per publication window the learner waits (validated inputs; 0.0 exactly
    when the pool's usable rate is fast enough)."""
    _check_inputs(t_train_s, t_bcast_s, kappa)
    require_int("batch", batch)
    usable = usable_rollouts_per_s(pool_rollouts_per_s, dropped_fraction)
    window_s = kappa * t_train_s
    if t_bcast_s < window_s and usable >= kappa * batch / (window_s - t_bcast_s):
        return 0.0
    return max(0.0, t_bcast_s + kappa * batch / usable - window_s)


def min_feasible_kappa(t_train_s: float, t_bcast_s: float) -> int:
    """Smallest kappa whose window strictly contains the broadcast: the gate's fix."""
    _check_inputs(t_train_s, t_bcast_s, 1)
    kappa = max(1, math.floor(t_bcast_s / t_train_s) + 1)
    while kappa * t_train_s <= t_bcast_s:  # guard against floor() rounding down a hair
        # +1 cannot move a kappa past 2**53 (the float product stays put): step by ulps
        kappa = max(kappa + 1, math.ceil(kappa * (1 + 2**-52)))
    return kappa
