"""Object storage behind a CDN: origin fetches per version and edge, fill, edge egress, allowances.

Expected figures are worked out here from the price table's numbers (per GiB
for AWS and Google, so divided by 1.073741824 to get per decimal GB).
"""

from __future__ import annotations

import dataclasses

import pytest

from wanrl_s3.cost.cdn import cdn_download_traffic, cdn_fill_s, cdn_read_s, origin_fetches
from wanrl_s3.cost.fleet import FleetLinks, WorkerLink
from wanrl_s3.cost.inputs import CDN_ROWS, PlanInputs
from wanrl_s3.cost.plan import estimate, evaluate
from wanrl_s3.cost.prices import PriceBook
from wanrl_s3.cost.timing import t_bcast_model_s
from wanrl_s3.cost.traffic import topologies
from wanrl_s3.errors import UsageError

GIB = 1.073741824


def test_each_edge_fetches_a_version_once() -> None:
    assert origin_fetches(workers=11, edges=8) == 8
    assert origin_fetches(workers=5, edges=8) == 5  # fewer workers than edges
    t = cdn_download_traffic(16.4, 64.0, workers=11, edges=8)
    assert (t.cdn_fill_gb, t.cdn_egress_gb) == (pytest.approx(8 * 16.4), pytest.approx(11 * 16.4))
    assert t.storage_egress_gb == 0.0  # the bucket serves only the edges
    # per worker: the manifest and 16.4 GB in ranged GETs of 8 MiB (1,956), through the edge
    assert t.cdn_requests == 11 * (1 + 1956)
    assert t.get_requests == 8 * (257 + 1)  # each edge fills every object and the manifest
    assert t.list_requests == 11  # each worker lists the version on the bucket (PUT-priced)


def test_cloudfront_in_front_of_s3(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    row = evaluate(inputs_8b, prices, "cdn_full", 11)
    # S3 to CloudFront is free; 51 versions x 11 workers leave the edges in one month,
    # the first 1 TB (1,024 GiB) free, the rest in the first $0.085/GiB tier.
    run_gb = 51 * 11 * 16.4
    assert row.egress_usd_per_run == pytest.approx((run_gb - 1024 * GIB) * 0.085 / GIB)
    plain = evaluate(inputs_8b, prices, "object_storage_full", 11)
    assert row.egress_usd_per_run < plain.egress_usd_per_run


def test_cloud_cdn_bills_the_cache_fill(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    gcs = dataclasses.replace(inputs_8b, provider="gcs")
    row = evaluate(gcs, prices, "cdn_full", 11)
    fill_usd = 51 * 8 * 16.4 * 0.01 / GIB  # 8 edges fetch each version, $0.01/GiB
    edge_usd = 51 * 11 * 16.4 * 0.08 / GIB  # under 10 TiB a month, no free allowance
    assert row.egress_usd_per_run == pytest.approx(fill_usd + edge_usd)
    shielded = evaluate(dataclasses.replace(gcs, cdn_edges=1), prices, "cdn_full", 11)
    assert row.egress_usd_per_run - shielded.egress_usd_per_run == pytest.approx(
        51 * 7 * 16.4 * 0.01 / GIB
    )


def test_cloudflare_in_front_of_b2_is_free_egress(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    b2 = dataclasses.replace(inputs_8b, provider="b2", trainer_provider="flat")
    assert evaluate(b2, prices, "cdn_full", 11).egress_usd_per_run == 0.0
    # Without the CDN, B2 bills what its 3x-stored allowance does not cover: 2 retained
    # versions of 16.4 GB stored, so 98.4 GB a month free, then $0.01/GB.
    run_gb = 51 * 11 * 16.4
    plain = evaluate(b2, prices, "object_storage_full", 11)
    assert plain.egress_usd_per_run == pytest.approx((run_gb - 3 * 2 * 16.4) * 0.01)


def test_the_free_tier_flag_takes_the_account_allowances_back(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    paid = dataclasses.replace(inputs_8b, free_tier=False)
    row = evaluate(paid, prices, "cdn_full", 11)
    assert row.egress_usd_per_run == pytest.approx(51 * 11 * 16.4 * 0.085 / GIB)
    plain = evaluate(paid, prices, "object_storage_full", 11)
    assert plain.egress_usd_per_run == pytest.approx(51 * 11 * 16.4 * 0.09 / GIB)


def test_cdn_rows_only_where_a_cdn_fronts_the_provider(
    inputs_8b: PlanInputs, prices: PriceBook
) -> None:
    assert set(CDN_ROWS) <= set(topologies(inputs_8b, prices))
    azure = dataclasses.replace(inputs_8b, provider="azure")  # no Azure CDN in the table
    assert not set(CDN_ROWS) & set(topologies(azure, prices))
    off = dataclasses.replace(inputs_8b, cdn="none")
    assert not set(CDN_ROWS) & {r.name for r in estimate(off, prices).by_topology}
    with pytest.raises(UsageError, match="has no origin price for 'aws'"):
        estimate(dataclasses.replace(inputs_8b, cdn="cloud_cdn"), prices)


def test_the_plan_names_the_entries_it_used(inputs_8b: PlanInputs, prices: PriceBook) -> None:
    assert estimate(inputs_8b, prices).price_entries == ("storage.aws", "cdns.cloudfront", "gpus")
    r2 = dataclasses.replace(inputs_8b, provider="r2", trainer_provider="aws")
    assert estimate(r2, prices).price_entries == (
        "storage.r2", "storage.aws", "cdns.cloudflare", "gpus",
    )  # fmt: skip


def test_the_edges_fill_is_waited_for_by_the_first_reader_at_each_edge(
    inputs_8b: PlanInputs,
) -> None:
    plain = {
        (name, fleet): t_bcast_model_s(inputs_8b, name, fleet)
        for name in ("object_storage_full", "cdn_full", "object_storage_delta", "cdn_delta")
        for fleet in (4, 11)
    }
    assert plain["cdn_full", 11] == plain["object_storage_full", 11]  # left out by default
    filled = dataclasses.replace(inputs_8b, cdn_fill_rtt_ms=40.0)
    for kind in ("full", "delta"):
        for fleet, first_share in ((4, 1.0), (11, 8 / 11)):  # 8 edges: 8 of 11 are first
            bucket = t_bcast_model_s(filled, f"object_storage_{kind}", fleet)
            assert bucket == plain[f"object_storage_{kind}", fleet]
            through = t_bcast_model_s(filled, f"cdn_{kind}", fleet)
            assert through == pytest.approx(bucket + 0.08 * first_share)
    assert cdn_fill_s(0.04) == pytest.approx(0.08)
    assert cdn_read_s(0.04, 0.0, workers=100, edges=2) == pytest.approx(0.08 * 2 / 100)
    with pytest.raises(UsageError, match="cdn_fill_rtt_ms"):
        dataclasses.replace(inputs_8b, cdn_fill_rtt_ms=-1.0)


def _fleet(*rtts_ms: float) -> FleetLinks:
    return FleetLinks(tuple(
        WorkerLink(f"w{k}", downlink_mbps=100.0, uplink_mbps=50.0, rtt_ms=rtt)
        for k, rtt in enumerate(rtts_ms)
    ))  # fmt: skip


def test_the_edges_cached_answers_skip_the_stores_answer_time_on_two_reads(
    inputs_8b: PlanInputs,
) -> None:
    fleet = _fleet(30.0, 80.0, 120.0)
    base = dataclasses.replace(inputs_8b, fleet=fleet, workers=3, cdn_edges=1)
    quick = dataclasses.replace(base, store_answer_ms=7.0, cdn_fill_rtt_ms=20.0)
    for kind in ("full", "delta"):
        bucket = t_bcast_model_s(quick, f"object_storage_{kind}", 3)
        assert bucket == t_bcast_model_s(base, f"object_storage_{kind}", 3)  # bucket unchanged
        # one edge: one reader in three waits 2 x 20 ms; the manifest and payload skip 7 ms each
        expected = bucket + 0.04 / 3 - 2 * 0.007
        assert t_bcast_model_s(quick, f"cdn_{kind}", 3) == pytest.approx(expected)
    with pytest.raises(UsageError, match=r"cannot exceed the smallest \(w0: 30 ms\)"):
        dataclasses.replace(base, store_answer_ms=31.0)
    with pytest.raises(UsageError, match="store_answer_ms needs a fleet"):
        dataclasses.replace(inputs_8b, store_answer_ms=5.0)
    with pytest.raises(UsageError, match="store_answer_ms"):
        dataclasses.replace(base, store_answer_ms=-1.0)
