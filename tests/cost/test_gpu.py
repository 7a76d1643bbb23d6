"""GPU cost: the page's third executed block, its checks, and cost-aware activation."""

from __future__ import annotations

import random

import pytest

from wanrl_s3.cost.gpu import (
    WorkerOffer,
    activate_cheapest,
    break_even_step_s,
    break_even_workers,
    cost_per_step_usd,
    hourly_usd,
    saving_fraction,
)
from wanrl_s3.cost.prices import PriceBook
from wanrl_s3.errors import InfeasiblePlanError, UsageError

# The page's "Executed output" of rollout_offload_cost.py, verbatim.
PAGE_OUTPUT = """\
colocated : $ 24.48/hr, 1508 s/step -> $10.26/step
offloaded : $ 15.04/hr, 1631 s/step -> $6.81/step
saving 33.6% per step, while each step takes +8.2% longer
break-even step length: 2455 s (actual 1631 s)

already-disaggregated : $52.20/hr x 36.6667 h = $1,914
commodity rollout tier: $49.80/hr x 36.6667 h = $1,826
saving 4.6% -- and the two implied run lengths are identical, so this is the price ratio, \
not a systems result

break-even fleet: 83 commodity workers (deployed: 76)
   76 workers -> +4.6% vs the disaggregated baseline
   83 workers -> -0.1% vs the disaggregated baseline
   84 workers -> -0.8% vs the disaggregated baseline
same fleets, offloaded step 100% of baseline -> +4.6%
same fleets, offloaded step 105% of baseline -> -0.2%
same fleets, offloaded step 110% of baseline -> -4.9%"""

BASE, BASE_STEP_S = {"A100-80GB": 8}, 1508.2
OFFLOAD, OFFLOAD_STEP_S = {"A100-80GB": 4, "RTX-5090": 8}, 1631.2
PRIME = {"H100": 8 + 10}
ECHO = {"H100": 8, "RTX-5090": 76}


def _case_one(rates: dict[str, float]) -> list[str]:
    base_usd = cost_per_step_usd(BASE, BASE_STEP_S, rates)
    off_usd = cost_per_step_usd(OFFLOAD, OFFLOAD_STEP_S, rates)
    saving = saving_fraction(base_usd, off_usd)
    return [
        f"colocated : ${hourly_usd(BASE, rates):>6.2f}/hr, {BASE_STEP_S:.0f} s/step -> "
        f"${base_usd:.2f}/step",
        f"offloaded : ${hourly_usd(OFFLOAD, rates):>6.2f}/hr, {OFFLOAD_STEP_S:.0f} s/step -> "
        f"${off_usd:.2f}/step",
        f"saving {100 * saving:.1f}% per step, while each step takes "
        f"{100 * (OFFLOAD_STEP_S / BASE_STEP_S - 1):+.1f}% longer",
        f"break-even step length: {break_even_step_s(BASE, BASE_STEP_S, OFFLOAD, rates):.0f} s "
        f"(actual {OFFLOAD_STEP_S:.0f} s)",
    ]


def _case_two(rates: dict[str, float]) -> list[str]:
    prime, echo = hourly_usd(PRIME, rates), hourly_usd(ECHO, rates)
    hours = 1914 / prime
    lines = [
        f"already-disaggregated : ${prime:.2f}/hr x {hours:.4f} h = ${prime * hours:,.0f}",
        f"commodity rollout tier: ${echo:.2f}/hr x {hours:.4f} h = ${echo * hours:,.0f}",
        f"saving {100 * saving_fraction(prime, echo):.1f}% -- and the two implied run lengths are "
        "identical, so this is the price ratio, not a systems result",
        "",
    ]
    fleet = break_even_workers(prime, hourly_usd({"H100": 8}, rates), rates["RTX-5090"])
    lines.append(f"break-even fleet: {fleet:.0f} commodity workers (deployed: 76)")
    for n in (76, 83, 84):
        delta = 100 * saving_fraction(prime, hourly_usd({"H100": 8, "RTX-5090": n}, rates))
        lines.append(f"  {n:>3} workers -> {delta:+.1f}% vs the disaggregated baseline")
    for slower in (1.00, 1.05, 1.10):
        lines.append(
            f"same fleets, offloaded step {slower:.0%} of baseline -> "
            f"{100 * saving_fraction(prime, echo * slower):+.1f}%"
        )
    return lines


def test_reproduces_the_page_output_exactly(prices: PriceBook) -> None:
    rates = dict(prices.gpu_usd_per_hour)
    assert "\n".join([*_case_one(rates), "", *_case_two(rates)]) == PAGE_OUTPUT


def test_published_totals_share_one_run_length(prices: PriceBook) -> None:
    rates = prices.gpu_usd_per_hour
    hours = 1914 / hourly_usd(PRIME, rates)
    assert round(hourly_usd(PRIME, rates) * hours) == 1914
    assert round(hourly_usd(ECHO, rates) * hours) == 1826
    assert abs(1826 / hourly_usd(ECHO, rates) - hours) < 1e-9


def test_the_price_ratio_win_flips_with_worker_count_and_step_length(prices: PriceBook) -> None:
    rates = prices.gpu_usd_per_hour
    assert hourly_usd({"H100": 8, "RTX-5090": 84}, rates) > hourly_usd(PRIME, rates)
    assert hourly_usd(ECHO, rates) * 1.10 > hourly_usd(PRIME, rates)


def test_unknown_gpu_is_a_usage_error_naming_the_known_ones(prices: PriceBook) -> None:
    with pytest.raises(UsageError, match="RTX-5090"):
        hourly_usd({"TPU": 1}, prices.gpu_usd_per_hour)


# ------------------------------------------------------ cost-aware activation


def _mixed_pool() -> list[WorkerOffer]:
    """Fast-but-pricey cards next to slower cheap ones, as on a rental marketplace."""
    pool = [WorkerOffer(f"h100-{i}", 2.90, 1.20) for i in range(4)]
    pool += [WorkerOffer(f"5090-{i}", 0.35, 0.33) for i in range(12)]
    pool += [WorkerOffer(f"4090-{i}", 0.30, 0.20) for i in range(6)]
    return pool


def test_activation_takes_the_cheapest_prefix_by_rho() -> None:
    chosen = activate_cheapest(_mixed_pool(), required_rollouts_per_s=2.621, gamma=1.1)
    assert chosen.rollouts_per_s >= 1.1 * 2.621
    rhos = [w.rho for w in chosen.workers]
    assert rhos == sorted(rhos)
    assert all(w.name.startswith("5090") for w in chosen.workers)  # lowest $/rollout/s first
    without_last = chosen.rollouts_per_s - chosen.workers[-1].rollouts_per_s
    assert without_last < 1.1 * 2.621  # a prefix, and the shortest one


def test_activation_beats_random_selection_of_the_same_capacity() -> None:
    pool, target = _mixed_pool(), 1.1 * 2.621
    chosen = activate_cheapest(pool, 2.621, 1.1)
    rng = random.Random(7)
    for _ in range(50):
        shuffled = rng.sample(pool, len(pool))
        rate = usd = 0.0
        for offer in shuffled:
            if rate >= target:
                break
            rate, usd = rate + offer.rollouts_per_s, usd + offer.usd_per_hour
        assert usd >= chosen.usd_per_hour


def test_activation_reports_a_short_pool_as_infeasible() -> None:
    with pytest.raises(InfeasiblePlanError, match="short of"):
        activate_cheapest([WorkerOffer("a", 0.35, 0.33)], required_rollouts_per_s=1.0)


def test_worker_offer_validates() -> None:
    with pytest.raises(UsageError):
        WorkerOffer("zero", 0.35, 0.0)
