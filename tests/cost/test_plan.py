"""The combined estimate at the page's 8B operating point, and its edges."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanrl_s3.cost import capacity as cap
from wanrl_s3.cost.inputs import SHIPPED_ROWS, TOPOLOGIES, PlanInputs
from wanrl_s3.cost.plan import estimate, evaluate
from wanrl_s3.cost.prices import PriceBook
from wanrl_s3.cost.publication import TYPICAL_FULL_RATIO
from wanrl_s3.cost.timing import size_fleet, t_bcast_model_s
from wanrl_s3.errors import InfeasiblePlanError, UsageError

from .operating_point import BATCH, PARAMS_8B, T_BCAST_S, T_TRAIN_S

GIB = 1.073741824  # decimal GB in one GiB: AWS bills per GiB
AWS_FREE_GB = 100 * GIB  # the account's free internet egress each month


def aws_first_tier_usd(volume_gb: float) -> float:
    """A month's AWS egress inside the first tier: the first 100 GiB free, then $0.09/GiB."""
    return max(0.0, volume_gb - AWS_FREE_GB) * 0.09 / GIB


def test_rows_at_the_8b_point(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    rows = {r.name: r for r in estimate(inputs_8b, prices).by_topology}
    assert list(rows) == list(TOPOLOGIES)
    got = {n: (f"{r.t_bcast_s:.0f}", r.feasible, r.workers_needed) for n, r in rows.items()}
    assert got == {
        "object_storage_full": ("1749", True, 11),  # 437 s upload at 300 Mbps + the 1312 s floor
        "object_storage_delta": ("87", True, 5),
        "cdn_full": ("1749", True, 11),  # the bucket's timing: edges fill as fast as workers pull
        "cdn_delta": ("87", True, 5),
        "star": ("3936", False, None),  # the page's N=9, 300 Mbps cell: the gate fires
        "peer_chain": ("1322", True, 9),  # the page's N=9 chains cell
    }


def test_egress_per_publication_is_bytes_times_list_price(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    plan = estimate(inputs_8b, prices)
    full, chain = plan.row("object_storage_full"), plan.row("peer_chain")
    # 100 steps of 1500 s fit in one billing month: one allowance, all inside the 10 TiB tier.
    # The run is one initial full distribution plus 50 publications: 51 x 11 workers x 16.4 GB.
    run_gb = 51 * 11 * 16.4
    assert full.egress_usd_per_run == pytest.approx(aws_first_tier_usd(run_gb))
    assert full.egress_usd_per_publication == pytest.approx(full.egress_usd_per_run / 51)
    chain_gb = 51 * 3 * 16.4  # 3 chains: the trainer sends three copies a publication
    assert chain.egress_usd_per_run == pytest.approx(aws_first_tier_usd(chain_gb))


def test_r2_fan_out_costs_only_the_trainers_upload(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    r2 = dataclasses.replace(inputs_8b, provider="r2", trainer_provider="aws")
    row = evaluate(r2, prices, "object_storage_full", 11)
    assert row.egress_usd_per_run == pytest.approx(aws_first_tier_usd(51 * 16.4))
    flat = dataclasses.replace(r2, trainer_provider="flat")
    assert evaluate(flat, prices, "object_storage_full", 11).egress_usd_per_publication == 0.0


def test_a_storage_only_provider_cannot_host_the_trainer(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    with pytest.raises(UsageError, match="--trainer-provider"):
        estimate(dataclasses.replace(inputs_8b, provider="b2"), prices)


def test_regions_add_inter_region_copies(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    one = evaluate(inputs_8b, prices, "object_storage_full", 12)
    three = evaluate(dataclasses.replace(inputs_8b, regions=3), prices, "object_storage_full", 12)
    extra = three.egress_usd_per_publication - one.egress_usd_per_publication
    assert extra == pytest.approx(2 * 16.4 * 0.02 / GIB)  # to unnamed US regions: $0.02/GiB
    assert three.t_bcast_s > one.t_bcast_s  # three uploads share the uplink


def test_inter_region_is_priced_per_region_pair(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    one = evaluate(inputs_8b, prices, "object_storage_full", 12).egress_usd_per_publication

    def extra(*replicas: str) -> float:
        named = dataclasses.replace(inputs_8b, regions=1 + len(replicas), replica_regions=replicas)
        return evaluate(named, prices, "object_storage_full", 12).egress_usd_per_publication - one

    assert extra("us-east-2") == pytest.approx(16.4 * 0.01 / GIB)  # the corrected pair
    assert extra("us-east-2", "us-west-2") == pytest.approx(16.4 * (0.01 + 0.02) / GIB)
    with pytest.raises(UsageError, match="1 \\+ the 1 replica regions"):
        dataclasses.replace(inputs_8b, regions=3, replica_regions=("us-east-2",))


def test_relay_egress_is_billed_only_when_set(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    billed = dataclasses.replace(inputs_8b, relay_usd_per_gb=0.01)
    base = evaluate(inputs_8b, prices, "peer_chain", 9).egress_usd_per_publication
    with_relay = evaluate(billed, prices, "peer_chain", 9).egress_usd_per_publication
    assert with_relay - base == pytest.approx(6 * 16.4 * 0.01)  # 9 workers, 3 fed by the trainer


def test_measured_broadcast_drives_the_headline(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    plan = estimate(dataclasses.replace(inputs_8b, t_bcast_s=T_BCAST_S), prices)
    assert (plan.t_bcast_source, f"{plan.slack_s:.0f}", plan.workers_needed) == (
        "measured",
        "1563",
        9,
    )
    assert f"{plan.required_pool_rollouts_per_s:.3f}" == "2.621"


def test_recommendation_is_the_cheapest_feasible_row(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    plan = estimate(inputs_8b, prices)
    feasible = [r for r in plan.by_topology if r.feasible and r.shipped]
    assert plan.recommended == min(feasible, key=lambda r: r.total_usd_per_step).name
    assert "star cannot fit the broadcast" in plan.reason
    assert plan.t_bcast_source == plan.recommended


def test_no_feasible_topology_raises_with_the_fix(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    tight = dataclasses.replace(inputs_8b, t_train_s=30.0)
    with pytest.raises(InfeasiblePlanError) as caught:
        estimate(tight, prices)
    message = str(caught.value)
    assert message.startswith("infeasible: broadcast 87s does not fit in kappa*T_train = 60s;")
    assert "--kappa 3 (S=4)" in message and "--density below 3.43%" in message


def test_measured_broadcast_past_the_window_raises(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    with pytest.raises(InfeasiblePlanError, match=r"broadcast 3100s .* 3000s"):
        estimate(dataclasses.replace(inputs_8b, t_bcast_s=3100.0), prices)


def test_a_fixed_short_fleet_warns_and_stretches_the_step(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    plan = estimate(dataclasses.replace(inputs_8b, workers=4), prices)
    chain = plan.row("peer_chain")
    assert chain.fleet_workers == 4 and chain.bubble_ratio > 0 and chain.step_s > T_TRAIN_S
    assert any("peer chain: a fleet of 4 workers is smaller than the" in w for w in plan.warnings)


def test_delta_keyframes_cost_uploads_but_not_downloads(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    r2 = dataclasses.replace(inputs_8b, provider="r2", trainer_provider="aws", keyframe_every=10)
    row = evaluate(r2, prices, "object_storage_delta", 5)
    per_pub_gb = 0.82 + 16.4 / 10  # the delta, and a tenth of a keyframe
    run_gb = 16.4 + 50 * per_pub_gb  # plus the initial full upload
    rate = aws_first_tier_usd(run_gb) / run_gb
    assert row.egress_usd_per_publication == pytest.approx(per_pub_gb * rate)


def test_to_dict_carries_the_promised_keys(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    d = estimate(inputs_8b, prices).to_dict()
    for key in ("kappa", "staleness", "snapshot_gb", "slack_s", "required_pool_rollouts_per_s",
                "workers_needed", "feasible", "by_topology"):  # fmt: skip
        assert key in d
    for row in d["by_topology"].values():  # type: ignore[union-attr]
        assert {"t_bcast_s", "feasible", "workers_needed", "egress_usd_per_publication"} <= set(row)


@pytest.mark.parametrize(
    "change",
    [
        {"params": 0},
        {"batch": 0},
        {"density": 2.0},
        {"staleness": 2},
        {"gamma": 0.5},
        {"workers": 0},
        {"regions": 0},
        {"cdn_edges": 0},
        {"trainer_gpus": (("H100", 0),)},
    ],
)
def test_inputs_validate_on_creation(change: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        PlanInputs(**{"params": PARAMS_8B, "t_train_s": T_TRAIN_S, "batch": BATCH, **change})


# ---------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    st.floats(100.0, 5000.0),
    st.sampled_from([100.0, 300.0, 800.0, 2000.0]),
    st.integers(2, 5),
    st.floats(0.1, 2.0),
)
def test_sized_fleet_is_the_least_fixed_point(
    t_train_s: float, uplink: float, kappa: int, mu: float
) -> None:
    i = PlanInputs(
        params=PARAMS_8B, t_train_s=t_train_s, batch=BATCH, staleness=kappa + 1,
        uplink_mbps=uplink, worker_rollouts_per_s=mu,
    )  # fmt: skip
    for name in ("star", "peer_chain"):
        fleet, ok = size_fleet(i, name)
        if not ok:
            continue

        def needed(n: int, name: str = name) -> int:
            t = t_bcast_model_s(i, name, n)
            if not cap.is_feasible(t_train_s, t, kappa):
                return 10**9
            return cap.workers_needed(t_train_s, t, kappa, BATCH, mu, 1.1)

        assert needed(fleet) <= fleet
        assert all(needed(n) > n for n in range(max(1, fleet - 50), fleet))


def test_routes_wanrl_s3_does_not_ship_are_priced_but_never_recommended(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    """Whole versions only (density 1): the peer chain is the cheapest row, and not shipped."""
    whole = dataclasses.replace(inputs_8b, density=1.0, full_ratio=TYPICAL_FULL_RATIO)
    plan = estimate(whole, prices)
    rows = {r.name: r for r in plan.by_topology}
    assert {name for name, r in rows.items() if not r.shipped} == {"star", "peer_chain"}
    assert rows["peer_chain"].feasible
    assert rows["peer_chain"].total_usd_per_step < rows[plan.recommended].total_usd_per_step
    assert plan.recommended in SHIPPED_ROWS
    assert plan.t_bcast_source == plan.recommended
    assert "peer chain (modelled, not shipped by wanrl-s3) would cost $" in plan.reason
    assert "--include-unshipped ranks it" in plan.reason
    ranked = estimate(dataclasses.replace(whole, include_unshipped=True), prices)
    assert ranked.recommended == "peer_chain"
    assert "--include-unshipped" not in ranked.reason
    assert ranked.to_dict()["include_unshipped"] is True
    assert ranked.to_dict()["by_topology"]["peer_chain"]["shipped"] is False


def test_the_gate_names_an_unshipped_route_that_would_fit(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    """Only the modelled peer chain fits a 1100 s window (a small batch keeps its chains
    short): the plan fails the gate (no route it can deploy fits) and says which flag
    ranks the chain."""
    tight = dataclasses.replace(
        inputs_8b, density=1.0, full_ratio=TYPICAL_FULL_RATIO, t_train_s=550.0, batch=256
    )
    with pytest.raises(InfeasiblePlanError) as caught:
        estimate(tight, prices)
    assert str(caught.value).endswith(
        "; peer chain (modelled, not shipped by wanrl-s3) would fit: --include-unshipped ranks it"
    )
    assert estimate(dataclasses.replace(tight, include_unshipped=True), prices).recommended == (
        "peer_chain"
    )


def test_a_measured_broadcast_that_fits_where_no_modelled_row_does(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    """--t-bcast-s says the run fits; the model finds no row that does: a plan, not a crash."""
    plan = estimate(dataclasses.replace(inputs_8b, t_train_s=30.0, t_bcast_s=10.0), prices)
    assert not any(r.feasible for r in plan.by_topology)
    fastest = min((r for r in plan.by_topology if r.shipped), key=lambda r: r.t_bcast_s)
    assert plan.recommended == fastest.name
    assert plan.reason.startswith("no topology wanrl-s3 ships fits kappa*T_train = 60 s")
