"""Broadcast time per topology (cost/timing.py): coded full versions and the publish term."""

from __future__ import annotations

import dataclasses

import pytest

from wanrl_s3.cost import topology
from wanrl_s3.cost.fleet import FleetLinks, WorkerLink
from wanrl_s3.cost.inputs import BUCKET_ROWS, DELTA_ROWS, TOPOLOGIES, PlanInputs
from wanrl_s3.cost.plan import estimate, evaluate
from wanrl_s3.cost.prices import PriceBook
from wanrl_s3.cost.publication import TYPICAL_FULL_RATIO
from wanrl_s3.cost.timing import bucket_s, max_feasible_density, publish_s, t_bcast_model_s
from wanrl_s3.errors import InfeasiblePlanError, UsageError

from .operating_point import BATCH, PARAMS_8B, T_TRAIN_S

R = TYPICAL_FULL_RATIO
FULL_ROWS = tuple(n for n in TOPOLOGIES if n not in DELTA_ROWS)


def coded(inputs: PlanInputs, **change: object) -> PlanInputs:
    """The same inputs with the default (coded) full ratio."""
    return dataclasses.replace(inputs, full_ratio=PlanInputs.full_ratio, **change)


def test_the_default_ratio_is_the_codecs(inputs_8b: PlanInputs) -> None:
    assert inputs_8b.full_ratio == 1.0  # the fixture reproduces the page: raw
    assert coded(inputs_8b).full_ratio == R == 0.671


def test_the_default_ratio_scales_full_versions_by_exactly_that_factor(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    """Every full-snapshot figure is R x the raw one; every delta figure is untouched."""
    raw, cod = inputs_8b, coded(inputs_8b)
    assert cod.full_gb == pytest.approx(R * raw.full_gb) and cod.delta_gb == raw.delta_gb
    # 3 workers: one star copy each, and a chain of depth 1 (3 chains), so no chunk fill.
    for name in FULL_ROWS:
        assert t_bcast_model_s(cod, name, 3) == pytest.approx(R * t_bcast_model_s(raw, name, 3))
        row_raw, row_cod = evaluate(raw, prices, name, 3), evaluate(cod, prices, name, 3)
        assert row_cod.payload_gb == pytest.approx(R * row_raw.payload_gb)
    for name in DELTA_ROWS:
        assert t_bcast_model_s(cod, name, 3) == t_bcast_model_s(raw, name, 3)
        assert evaluate(cod, prices, name, 3).payload_gb == raw.delta_gb
    floor_raw = estimate(raw, prices).to_dict()["floor_s"]
    assert estimate(cod, prices).to_dict()["floor_s"] == pytest.approx(R * floor_raw)
    assert floor_raw == pytest.approx(1312.0)  # the page's 16.4 GB over 100 Mbps


def test_a_delta_larger_than_a_coded_full_version_ships_the_full_one(
    inputs_8b: PlanInputs,
) -> None:
    dense = dataclasses.replace(inputs_8b, density=0.9)
    for name in DELTA_ROWS:
        assert t_bcast_model_s(dense, name, 1) == pytest.approx(0.9 * bucket_s(dense, 16.4))
        auto = coded(dense)
        assert t_bcast_model_s(auto, name, 1) == t_bcast_model_s(auto, "object_storage_full", 1)


def test_without_a_trainer_uplink_publish_is_the_pages_upload(inputs_8b: PlanInputs) -> None:
    assert publish_s(inputs_8b, 16.4) == pytest.approx(437.33, abs=0.01)  # 16.4 GB at 300 Mbps
    for change in (
        {},
        {"regions": 3},
        {"regions": 3, "replicate": True, "replication_lag_s": 60.0},
    ):
        i = dataclasses.replace(inputs_8b, **change)
        page = topology.object_storage_s(
            16.4, 100.0, 300.0, i.regions, i.replicate, i.replication_lag_s
        )
        assert t_bcast_model_s(i, "object_storage_full", 1) == page


def test_trainer_ranks_set_the_publish_term(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    one = dataclasses.replace(inputs_8b, trainer_uplink_gbps=10.0)
    eight = dataclasses.replace(one, trainer_ranks=8)
    pull_s = topology.star_unlimited_s(16.4, 100.0)
    for i, upload_s in ((one, 16.4 * 8 / 10), (eight, 16.4 * 8 / 80)):
        assert publish_s(i, 16.4) == pytest.approx(upload_s + 3 * 0.05)
        assert t_bcast_model_s(i, "object_storage_full", 1) == pytest.approx(
            publish_s(i, 16.4) + pull_s
        )
        for name in BUCKET_ROWS:
            row = evaluate(i, prices, name, 4)
            assert row.publish_s == publish_s(i, row.payload_gb) and row.publish_s > 0
        for name in ("star", "peer_chain"):  # the trainer's push is the broadcast
            assert evaluate(i, prices, name, 4).publish_s == 0.0
            assert t_bcast_model_s(i, name, 4) == t_bcast_model_s(inputs_8b, name, 4)
    regions = dataclasses.replace(eight, regions=2)
    assert publish_s(regions, 16.4) == pytest.approx(2 * 16.4 * 8 / 80 + 0.15)
    assert publish_s(dataclasses.replace(regions, replicate=True), 16.4) == publish_s(eight, 16.4)


def test_a_fleet_pays_the_same_publish_term_before_its_quantile(inputs_8b: PlanInputs) -> None:
    links = FleetLinks(tuple(WorkerLink(f"w{n}", 50.0 + 10 * n, 50.0, 20.0) for n in range(5)))
    page = dataclasses.replace(inputs_8b, fleet=links, workers=5)
    ranks = dataclasses.replace(page, trainer_ranks=4, trainer_uplink_gbps=2.5)
    for name, payload_gb in (("object_storage_full", 16.4), ("object_storage_delta", 0.82)):
        gained_s = publish_s(page, payload_gb) - publish_s(ranks, payload_gb)
        assert gained_s > 0
        assert t_bcast_model_s(page, name, 5) - t_bcast_model_s(ranks, name, 5) == pytest.approx(
            gained_s
        )


def test_the_density_hint_puts_the_bucket_exactly_on_the_window(inputs_8b: PlanInputs) -> None:
    tight = dataclasses.replace(
        inputs_8b, t_train_s=30.0, trainer_ranks=2, trainer_uplink_gbps=0.1, regions=2,
        replicate=True, replication_lag_s=5.0,
    )  # fmt: skip
    density = max_feasible_density(tight)
    assert density is not None and 0 < density < 1
    assert bucket_s(tight, density * tight.snapshot_gb) == pytest.approx(tight.window_s)
    hopeless = dataclasses.replace(tight, replication_lag_s=100.0)  # the lag alone > 60 s
    assert max_feasible_density(hopeless) is None


def test_a_measured_broadcast_of_coded_full_versions_scales_the_hint(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    for ratio, hint in ((1.0, "96.8%"), (R, "64.9%")):  # R x 3000 / 3100
        i = dataclasses.replace(inputs_8b, t_bcast_s=3100.0, full_ratio=ratio)
        with pytest.raises(InfeasiblePlanError, match=f"--density below {hint}"):
            estimate(i, prices)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"full_ratio": 0.0}, "full_ratio"),
        ({"full_ratio": 1.5}, "full_ratio"),
        ({"full_ratio": float("nan")}, "full_ratio"),
        ({"trainer_ranks": 0, "trainer_uplink_gbps": 10.0}, "trainer_ranks"),
        ({"trainer_ranks": 8}, "needs trainer_uplink_gbps"),
        ({"trainer_uplink_gbps": 0.0}, "trainer_uplink_gbps"),
        ({"trainer_uplink_gbps": float("inf")}, "trainer_uplink_gbps"),
        ({"trainer_uplink_gbps": 10.0, "upload_mbps": 500.0}, "not both"),
        ({"trainer_rtt_s": -1.0}, "trainer_rtt_s"),
    ],
)
def test_publication_inputs_validate_on_creation(change: dict[str, object], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        PlanInputs(params=PARAMS_8B, t_train_s=T_TRAIN_S, batch=BATCH, **change)  # type: ignore[arg-type]


def test_measured_figures_replace_the_model_and_can_change_the_recommendation(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    fixed = dataclasses.replace(inputs_8b, workers=40)
    modelled = estimate(fixed, prices)
    window_s = fixed.window_s
    # the recommended row measured slower than the window: it is no longer feasible
    slow = ((modelled.recommended, window_s + 1.0),)
    measured = estimate(dataclasses.replace(fixed, measured_t_bcast_s=slow), prices)
    row = {r.name: r for r in measured.by_topology}[modelled.recommended]
    assert row.t_bcast_s == window_s + 1.0 and not row.feasible
    assert measured.recommended != modelled.recommended
    with pytest.raises(UsageError, match="known"):
        dataclasses.replace(fixed, measured_t_bcast_s=(("buckets", 1.0),))
    with pytest.raises(UsageError, match="fixed fleet"):
        dataclasses.replace(inputs_8b, workers=None, measured_t_bcast_s=slow)
