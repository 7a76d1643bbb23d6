"""The capacity rule: the page's first executed block, its adversarial checks, and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wanrl_s3.cost.capacity import (
    bubble_ratio,
    is_feasible,
    min_feasible_kappa,
    required_pool_rollouts_per_s,
    slack_s,
    staleness_budget,
    step_s_at_pool,
    workers_needed,
)
from wanrl_s3.errors import InfeasiblePlanError, UsageError

from .operating_point import BATCH, KAPPA, MU_WORKER, T_BCAST_S, T_TRAIN_S

# The page's "Executed output" of rollout_capacity.py, verbatim.
PAGE_OUTPUT = """\
slack per period   =     1563 s of 3000 s
required pool rate =    2.621 rollouts/s
workers @ gamma=1.0: 8
workers @ gamma=1.1: 9

kappa  slack(s)  pool rate  workers(gamma=1.1)
    2      1563      2.621                 9
    3      3063      2.006                 7
    5      6063      1.689                 6
    8     10563      1.551                 6

infeasible case -> infeasible: broadcast 3100s does not fit in kappa*T_train = 3000s; \
raise kappa (and S), or cut T_bcast
bubble at 70% of required capacity = 0.183
T_bcast=0 -> 1.365 rollouts/s for every kappa (plain rate matching)"""


def _reproduce_page_output() -> str:
    """Print the page's figures from our functions, with the page's format specs."""
    rate = required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH)
    lines = [
        f"slack per period   = {slack_s(T_TRAIN_S, T_BCAST_S, KAPPA):>8.0f} s of "
        f"{KAPPA * T_TRAIN_S:.0f} s",
        f"required pool rate = {rate:>8.3f} rollouts/s",
    ]
    for gamma in (1.0, 1.1):
        n = workers_needed(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, MU_WORKER, gamma)
        lines.append(f"workers @ gamma={gamma}: {n}")
    lines += ["", "kappa  slack(s)  pool rate  workers(gamma=1.1)"]
    for k in (2, 3, 5, 8):
        slack = slack_s(T_TRAIN_S, T_BCAST_S, k)
        r = required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, k, BATCH)
        n = workers_needed(T_TRAIN_S, T_BCAST_S, k, BATCH, MU_WORKER)
        lines.append(f"{k:>5}  {slack:>8.0f}  {r:>9.3f}  {n:>16}")
    with pytest.raises(InfeasiblePlanError) as caught:
        required_pool_rollouts_per_s(1500.0, 3100.0, 2, BATCH)
    lines += ["", f"infeasible case -> {caught.value}"]
    starved = bubble_ratio(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, 0.7 * rate)
    lines.append(f"bubble at 70% of required capacity = {starved:.3f}")
    plain = required_pool_rollouts_per_s(T_TRAIN_S, 0.0, KAPPA, BATCH)
    lines.append(f"T_bcast=0 -> {plain:.3f} rollouts/s for every kappa (plain rate matching)")
    return "\n".join(lines)


def test_reproduces_the_page_output_exactly() -> None:
    assert _reproduce_page_output() == PAGE_OUTPUT


def test_gate_fires_instead_of_returning_a_huge_fleet() -> None:
    with pytest.raises(InfeasiblePlanError):
        workers_needed(1500.0, 3100.0, 2, BATCH, MU_WORKER)
    assert InfeasiblePlanError.exit_code == 5


def test_bubble_is_zero_at_and_past_the_requirement_and_positive_below() -> None:
    mu_min = required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH)
    assert bubble_ratio(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, mu_min) == 0.0
    assert bubble_ratio(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, 10 * mu_min) == 0.0
    starved = bubble_ratio(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, 0.7 * mu_min)
    assert 0.0 < starved < 1.0


@pytest.mark.parametrize("kappa", [2, 8])
def test_zero_broadcast_collapses_to_plain_rate_matching(kappa: int) -> None:
    rate = required_pool_rollouts_per_s(T_TRAIN_S, 0.0, kappa, BATCH)
    assert abs(rate - BATCH / T_TRAIN_S) < 1e-9


def test_step_is_stretched_by_the_bubble() -> None:
    mu_min = required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH)
    assert step_s_at_pool(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, mu_min) == T_TRAIN_S
    # At 70% the period is T_bcast + slack / 0.7, spread over kappa steps.
    expected = (T_BCAST_S + (KAPPA * T_TRAIN_S - T_BCAST_S) / 0.7) / KAPPA
    got = step_s_at_pool(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, 0.7 * mu_min)
    assert math.isclose(got, expected, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("t_bcast_s", "kappa"), [(1437.0, 1), (1500.0, 2), (3000.0, 3), (3100.0, 3), (0.0, 1)]
)
def test_min_feasible_kappa_is_the_smallest_window_that_fits(t_bcast_s: float, kappa: int) -> None:
    assert min_feasible_kappa(1500.0, t_bcast_s) == kappa
    assert is_feasible(1500.0, t_bcast_s, kappa)
    assert kappa == 1 or not is_feasible(1500.0, t_bcast_s, kappa - 1)


def test_staleness_rule() -> None:
    assert staleness_budget().kappa == 2
    assert staleness_budget(staleness=6).warning is None
    assert "stable envelope" in (staleness_budget(staleness=7).warning or "")
    assert staleness_budget(kappa=4).staleness == 5
    with pytest.raises(UsageError, match="--force"):
        staleness_budget(staleness=2)
    assert staleness_budget(staleness=2, force=True).kappa == 1
    with pytest.raises(UsageError, match="not both"):
        staleness_budget(staleness=3, kappa=2)


@pytest.mark.parametrize(
    "call",
    [
        lambda: slack_s(0.0, 10.0, 2),
        lambda: slack_s(float("nan"), 10.0, 2),
        lambda: slack_s(10.0, -1.0, 2),
        lambda: slack_s(10.0, 1.0, 0),
        lambda: required_pool_rollouts_per_s(10.0, 1.0, 2, 0),
        lambda: workers_needed(10.0, 1.0, 2, 8, 0.0),
        lambda: workers_needed(10.0, 1.0, 2, 8, 1.0, gamma=0.9),
        lambda: bubble_ratio(10.0, 1.0, 2, 8, 0.0),
    ],
)
def test_bad_inputs_are_usage_errors(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError):
        call()


# ---------------------------------------------------------------- properties

times = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
kappas = st.integers(min_value=1, max_value=64)


@st.composite
def gate_cases(draw: st.DrawFn) -> tuple[float, float, int]:
    """Random points plus points exactly on the boundary kappa*T_train == T_bcast."""
    t_train, kappa = draw(times), draw(kappas)
    t_bcast = draw(st.one_of(st.floats(0.0, 1e8), st.just(kappa * t_train)))
    return t_train, t_bcast, kappa


@given(gate_cases())
def test_gate_fires_exactly_when_the_broadcast_fills_the_window(
    case: tuple[float, float, int],
) -> None:
    t_train, t_bcast, kappa = case
    infeasible = kappa * t_train <= t_bcast
    assert is_feasible(t_train, t_bcast, kappa) is not infeasible
    if infeasible:
        with pytest.raises(InfeasiblePlanError):
            required_pool_rollouts_per_s(t_train, t_bcast, kappa, BATCH)
    else:
        assert required_pool_rollouts_per_s(t_train, t_bcast, kappa, BATCH) > 0


@given(
    times,
    st.floats(0.0, 0.999),
    kappas,
    st.integers(1, 100_000),
    st.floats(1.0, 1e3),
)
def test_bubble_is_zero_at_or_above_the_required_rate(
    t_train: float, bcast_share: float, kappa: int, batch: int, factor: float
) -> None:
    t_bcast = bcast_share * kappa * t_train
    required = required_pool_rollouts_per_s(t_train, t_bcast, kappa, batch)
    assert bubble_ratio(t_train, t_bcast, kappa, batch, required * factor) == 0.0


@given(times, st.floats(0.0, 0.99), kappas, st.integers(1, 100_000), st.floats(0.01, 0.99))
def test_bubble_is_positive_below_the_required_rate(
    t_train: float, bcast_share: float, kappa: int, batch: int, factor: float
) -> None:
    t_bcast = bcast_share * kappa * t_train
    required = required_pool_rollouts_per_s(t_train, t_bcast, kappa, batch)
    assert 0.0 < bubble_ratio(t_train, t_bcast, kappa, batch, required * factor) < 1.0


# ---------------------------------------------------------------- what the filter drops


def test_drops_grow_the_pool_and_the_fleet_by_one_over_the_admitted_share() -> None:
    # Hand-computed, binary-exact: window 2 x 10 s, broadcast 4 s, slack 16 s, 2 x 32
    # trajectories: 4 rollouts/s admitted; half dropped -> 8 generated, three quarters -> 16.
    assert required_pool_rollouts_per_s(10.0, 4.0, 2, 32) == 4.0
    assert required_pool_rollouts_per_s(10.0, 4.0, 2, 32, dropped_fraction=0.5) == 8.0
    assert required_pool_rollouts_per_s(10.0, 4.0, 2, 32, dropped_fraction=0.75) == 16.0
    assert workers_needed(10.0, 4.0, 2, 32, 1.0, 1.0, dropped_fraction=0.5) == 8
    # The 8B point with a fifth dropped: 4096 / 1563 / 0.8 = 3.2758 rollouts/s, and
    # ceil(1.1 x 3.2758 / 0.33) = ceil(10.92) = 11 workers where the page sizes 9.
    rate = required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, dropped_fraction=0.2)
    assert math.isclose(rate, 3.275751759, rel_tol=1e-9)
    assert workers_needed(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, MU_WORKER, dropped_fraction=0.2) == 11


def test_drops_leave_the_learner_only_the_admitted_rate() -> None:
    # 4 rollouts/s generated is exactly enough with nothing dropped; half dropped leaves 2,
    # so a window takes 4 + 64 / 2 = 36 s for 20 s of training: 16 / 36 idle.
    assert bubble_ratio(10.0, 4.0, 2, 32, 4.0) == 0.0
    assert bubble_ratio(10.0, 4.0, 2, 32, 4.0, dropped_fraction=0.5) == 16.0 / 36.0
    assert bubble_ratio(10.0, 4.0, 2, 32, 8.0, dropped_fraction=0.5) == 0.0
    assert step_s_at_pool(10.0, 4.0, 2, 32, 4.0, dropped_fraction=0.5) == 18.0


def test_nothing_dropped_is_the_pages_rule_to_the_last_bit() -> None:
    rate = required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, dropped_fraction=0.0)
    assert rate == required_pool_rollouts_per_s(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH)
    assert f"{rate:.3f}" == "2.621"
    for gamma, fleet in ((1.0, 8), (1.1, 9)):
        got = workers_needed(
            T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, MU_WORKER, gamma, dropped_fraction=0.0
        )
        assert got == fleet
    starved = bubble_ratio(T_TRAIN_S, T_BCAST_S, KAPPA, BATCH, 0.7 * rate, dropped_fraction=0.0)
    assert f"{starved:.3f}" == "0.183"


@given(times, st.floats(0.0, 0.99), kappas, st.integers(1, 100_000), st.floats(1e-3, 1e3))
def test_zero_drops_change_no_figure(
    t_train: float, bcast_share: float, kappa: int, batch: int, pool: float
) -> None:
    t_bcast = bcast_share * kappa * t_train
    args = (t_train, t_bcast, kappa, batch)
    assert required_pool_rollouts_per_s(*args, dropped_fraction=0.0) == (
        required_pool_rollouts_per_s(*args)
    )
    assert bubble_ratio(*args, pool, dropped_fraction=0.0) == bubble_ratio(*args, pool)
    assert step_s_at_pool(*args, pool, dropped_fraction=0.0) == step_s_at_pool(*args, pool)


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, float("nan"), float("inf"), True, "0.1", None])
def test_a_drop_fraction_outside_zero_to_one_is_refused(bad: object) -> None:
    for call in (
        lambda: required_pool_rollouts_per_s(10.0, 4.0, 2, 32, dropped_fraction=bad),  # type: ignore[arg-type]
        lambda: workers_needed(10.0, 4.0, 2, 32, 1.0, dropped_fraction=bad),  # type: ignore[arg-type]
        lambda: bubble_ratio(10.0, 4.0, 2, 32, 4.0, dropped_fraction=bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(UsageError, match=r"dropped_fraction .* must be in \[0, 1\)"):
            call()


def test_the_gate_names_sub_second_times_to_two_digits() -> None:
    with pytest.raises(
        InfeasiblePlanError, match=r"broadcast 0.75s does not fit in kappa\*T_train = 0.72s"
    ):
        slack_s(0.36, 0.75, 2)
