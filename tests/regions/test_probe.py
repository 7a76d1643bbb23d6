"""Region choice at start-up: measured latency and throughput, unreachable regions left out."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.regions.support import SMALL, SlowProxy, closed_port, model, new_bucket_url
from wanrl_s3.errors import StoreError, UsageError
from wanrl_s3.publish.publisher import Publisher
from wanrl_s3.regions.config import Region, RegionsConfig
from wanrl_s3.regions.probe import RegionProbe, choose_region, rank_regions


def test_ranking_prefers_fast_then_fresh_and_leaves_out_the_unreachable() -> None:
    near = RegionProbe("near", 0.010, 800.0, 7, 10**8)
    far = RegionProbe("far", 0.150, 200.0, 7, 10**8)
    lagging = RegionProbe("lagging", 0.001, 5000.0, 2, 10**8)
    down = RegionProbe("down", error="connection refused")
    empty = RegionProbe("empty", 0.005)  # answers, but holds nothing to measure yet
    assert [p.region for p in rank_regions([far, down, near])] == ["near", "far"]
    ranked = rank_regions([far, lagging, near, empty], max_lag_versions=3)
    assert [p.region for p in ranked] == ["near", "far", "lagging", "empty"]  # empty lags most
    assert [p.region for p in rank_regions([far, lagging, near])] == ["lagging", "near", "far"]
    assert near.estimate_s(10**8) == pytest.approx(0.010 + 1.0)  # 800 Mbit/s moves 100 MB in 1 s


@pytest.fixture
def slow_proxy(s3_endpoint: str):
    proxy = SlowProxy(int(urlsplit(s3_endpoint).port or 0), delay_s=0.03)
    yield proxy
    proxy.close()


def test_auto_picks_the_faster_reachable_region(s3_endpoint: str, slow_proxy: SlowProxy) -> None:
    near = Region("near", new_bucket_url(s3_endpoint), "us-east-1", s3_endpoint)
    far = Region("far", new_bucket_url(s3_endpoint), "eu-west-1", slow_proxy.endpoint)
    down = Region("down", "s3://gone/run", "ap-south-1", f"http://127.0.0.1:{closed_port()}")
    regions = RegionsConfig("far", "fanout", (down, far, near))
    Publisher([far.store(), near.store()], SMALL).publish(model(1), 1)
    choice = choose_region(regions, "auto", timeout_s=20)
    assert choice.region == "near"
    assert choice.order == ("near", "far", "down")  # fallbacks: measured order, then the rest
    probes = {p.region: p for p in choice.probes}
    assert not probes["down"].reachable and "down" in probes["down"].describe()
    assert probes["far"].latency_s > probes["near"].latency_s  # type: ignore[operator]
    assert probes["far"].latest_version == probes["near"].latest_version == 1
    named = choose_region(regions, "down")  # a named region is taken as it is
    assert (named.region, named.order, named.probes) == ("down", ("down", "far", "near"), ())


def test_no_region_answering_is_a_store_error_and_a_bad_name_a_usage_error() -> None:
    down = Region("down", "s3://gone/run", "", f"http://127.0.0.1:{closed_port()}")
    regions = RegionsConfig("down", "copy", (down,))
    with pytest.raises(StoreError, match="no region answered: down: unreachable"):
        choose_region(regions, "auto", timeout_s=20)
    with pytest.raises(UsageError, match="no region 'nope'"):
        choose_region(regions, "nope")
