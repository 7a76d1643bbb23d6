"""cost/requests.py: the peak reads a second a plan puts on one bucket, and LATEST's bill."""

from __future__ import annotations

import math

import pytest

from wanrl_s3.cost import FleetLinks, PlanInputs, PriceBook, WorkerLink, read_rates
from wanrl_s3.cost.requests import (
    READ_CONCURRENCY,
    READ_REQUEST_MB,
    payload_reads,
    polls_per_month,
    remedy,
    request_load,
)
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.store import open_store
from wanrl_s3.units import MiB

#: An 8.2B policy's 1 % deltas to 10,000 workers over three regions, polling every 10 s.
TEN_THOUSAND = PlanInputs(
    params=8.2e9, t_train_s=150, batch=2048, density=0.01, workers=10_000, regions=3,
    poll_interval_s=10.0,
)  # fmt: skip


def test_the_request_size_and_concurrency_are_the_readers() -> None:
    """The model counts the GETs the reader makes: buffered reads are cut at its window
    over its concurrency (fetch/stream.py), at least 1 MiB, at most its range."""
    with Subscriber(open_store("memory://requests")) as sub:
        cut = min(sub.range_bytes, max(MiB, sub.window_bytes // sub.concurrency))
        assert cut == READ_REQUEST_MB * 1e6
        assert sub.concurrency == READ_CONCURRENCY


def test_payload_reads_round_up_and_never_reach_zero() -> None:
    one = READ_REQUEST_MB / 1000  # GB
    assert payload_reads(0.0) == 1
    assert payload_reads(one) == 1 and payload_reads(one * 1.01) == 2
    assert payload_reads(0.164) == 20  # a 1 % delta of an 8.2B bf16 policy


def test_peak_reads_by_hand_for_a_uniform_bucket() -> None:
    """1,000 workers, 10 s polls, a 0.164 GB delta (20 GETs) at 100 Mbit/s: polls 100/s;
    100 workers a second each make 2 + 16 reads at once, the busiest second two standard
    deviations over the mean: 18 x (100 + 20) = 2,160/s; the other 4 GETs each, spread
    over the poll interval (0.4/s per worker, under the link's 1.42/s): 400/s."""
    rates = read_rates([100.0] * 1000, 0.164, 10.0)
    assert rates.polls_per_s == pytest.approx(100.0)
    assert rates.burst_per_s == pytest.approx(18 * (100 + 2 * 10))
    assert rates.stream_per_s == pytest.approx(400.0)
    assert rates.peak_per_s == pytest.approx(100 + 2160 + 400)


def test_a_long_download_streams_at_the_links_pace_not_faster() -> None:
    """A keyframe of 1,000 GETs: after the first 16, one per part landing, which a
    100 Mbit/s link does 100e6 / 8 x 1448/1514 / 8 MiB = 1.425 times a second."""
    rates = read_rates([100.0] * 10, 8.39, 10.0)
    per_worker = 100e6 / 8 * 1448 / 1514 / (READ_REQUEST_MB * 1e6)
    assert rates.stream_per_s == pytest.approx(10 * per_worker)


def test_behind_a_cdn_the_bucket_keeps_the_polls_and_the_listings() -> None:
    rates = read_rates([100.0] * 1000, 0.164, 10.0, cdn=True)
    assert (rates.polls_per_s, rates.burst_per_s, rates.stream_per_s) == (100.0, 120.0, 0.0)


def test_polls_per_month_and_their_bill() -> None:
    assert polls_per_month(10_000, 10.0) == pytest.approx(10_000 * 730 * 3600 / 10)


def test_over_the_limit_the_remedy_is_the_shortest_poll_interval_that_fits(
    prices: PriceBook,
) -> None:
    inputs = TEN_THOUSAND
    load = request_load(
        inputs, "object_storage_delta", 10_000, prices.provider("aws").request_limits
    )
    assert load.workers_per_bucket == 3334 and load.limit_per_s == 5500 and load.scope == "prefix"
    assert load.over
    fit = load.poll_interval_fit_s
    assert fit is not None and fit > 10
    downlinks = [100.0] * 3334
    assert read_rates(downlinks, inputs.delta_row_gb, fit).peak_per_s <= 5500
    assert read_rates(downlinks, inputs.delta_row_gb, fit - 0.2).peak_per_s > 5500
    cdn = request_load(inputs, "cdn_delta", 10_000, prices.provider("aws").request_limits)
    assert not cdn.over and cdn.rates.peak_per_s == pytest.approx(2 * 333.4 + 2 * 333.4**0.5)


def test_a_fleet_file_puts_each_worker_in_its_regions_bucket(prices: PriceBook) -> None:
    links = tuple(
        WorkerLink(f"w{i}", 100.0, 50.0, 20.0, "eu" if i < 30 else "us") for i in range(40)
    )
    fleet = FleetLinks(links)
    inputs = PlanInputs(params=1e9, t_train_s=60, batch=64, fleet=fleet, workers=40)
    load = request_load(inputs, "object_storage_full", 40, prices.provider("aws").request_limits)
    assert load.workers_per_bucket == 30  # the busiest bucket's


def test_a_given_limit_replaces_the_documented_one_and_must_be_positive(
    prices: PriceBook,
) -> None:
    inputs = PlanInputs(params=1e9, t_train_s=60, batch=64, workers=100)
    limits = prices.provider("aws").request_limits
    assert request_load(inputs, "object_storage_delta", 100, limits, 50.0).limit_per_s == 50.0
    assert request_load(inputs, "object_storage_delta", 100, None).limit_per_s is None
    with pytest.raises(ValueError, match="read_limit_per_s"):
        request_load(inputs, "object_storage_delta", 100, limits, -1.0)
    assert not math.isnan(request_load(inputs, "cdn_full", 100, limits).rates.peak_per_s)


def test_azure_checks_the_busiest_object_against_its_per_blob_target(prices: PriceBook) -> None:
    azure = prices.provider("azure").request_limits
    assert azure is not None and azure.object_read_per_s == 500 and azure.scope == "account"
    inputs = PlanInputs(params=1e9, t_train_s=60, batch=64, workers=10_000, provider="azure")
    load = request_load(inputs, "object_storage_delta", 10_000, azure)
    assert load.object_peak_per_s >= 10_000 / 10 and load.object_over


def test_payload_prefixes_by_hand_for_a_uniform_bucket() -> None:
    """The same delta dealt over prefixes: 20 GETs on 3 objects (8, 8, 4), object n under
    prefix n mod K. 120 workers start in the busiest second; the run's prefix keeps the
    polls, listings and manifests: 100 + 2 x 120. K = 2: prefix 0 holds objects 0 and 2,
    so 8 of the first 16 GETs and all 4 streamed ones: (1 listing + 8) x 120 + 400; K = 4:
    prefix 0 (object 0) gets (1 + 8) x 120, prefix 2 (object 2) 120 + 400."""
    two = read_rates([100.0] * 1000, 0.164, 10.0, payload_prefixes=2)
    assert two.run_prefix_per_s == pytest.approx(100 + 240)
    assert two.payload_prefix_per_s == pytest.approx(9 * 120 + 400)
    assert two.peak_per_s == pytest.approx(1480)
    assert two.burst_per_s == pytest.approx((2 + 2 + 16) * 120)  # two payload listings
    four = read_rates([100.0] * 1000, 0.164, 10.0, payload_prefixes=4)
    assert four.payload_prefix_per_s == pytest.approx(9 * 120)
    assert four.burst_per_s == pytest.approx((2 + 3 + 16) * 120)  # three prefixes hold objects
    one = read_rates([100.0] * 1000, 0.164, 10.0)
    assert one.payload_prefix_per_s == 0 and one.run_prefix_per_s == one.total_per_s
    with pytest.raises(ValueError, match="payload_prefixes"):
        read_rates([100.0], 0.164, 10.0, payload_prefixes=257)


def test_over_the_limit_the_remedy_names_the_fewest_payload_prefixes_that_fit(
    prices: PriceBook,
) -> None:
    inputs = TEN_THOUSAND
    limits = prices.provider("aws").request_limits
    downlinks = [100.0] * 3334
    for row, gb in (("object_storage_delta", inputs.delta_row_gb), ("object_storage_full",
                                                                    inputs.full_gb)):  # fmt: skip
        load = request_load(inputs, row, 10_000, limits)
        k = load.payload_prefixes_fit
        assert load.over and k is not None and k > 1
        assert read_rates(downlinks, gb, 10.0, payload_prefixes=k).peak_per_s <= 5500
        assert read_rates(downlinks, gb, 10.0, payload_prefixes=k - 1).peak_per_s > 5500
        assert f"--payload-prefixes {k}" in remedy(load, None)
        spread = PlanInputs(**{**inputs.__dict__, "payload_prefixes": k})
        assert not request_load(spread, row, 10_000, limits).over


def test_no_payload_prefixes_are_proposed_where_they_cannot_help(prices: PriceBook) -> None:
    """The run's prefix alone over the limit (polls every second), or a limit per bucket
    (GCS): dealing the payload apart does not bring the busiest under it."""
    aws = prices.provider("aws").request_limits
    busy = PlanInputs(params=8.2e9, t_train_s=150, batch=2048, density=0.01, workers=10_000,
                      poll_interval_s=1.0)  # fmt: skip
    load = request_load(busy, "object_storage_delta", 10_000, aws)
    assert load.over and load.payload_prefixes_fit is None
    assert "--payload-prefixes" not in remedy(load, None)
    gcs = prices.provider("gcs").request_limits
    assert gcs is not None and gcs.scope == "bucket"
    spread = PlanInputs(params=8.2e9, t_train_s=150, batch=2048, density=0.01, workers=10_000,
                        provider="gcs", payload_prefixes=8)  # fmt: skip
    load = request_load(spread, "object_storage_delta", 10_000, gcs)
    assert load.payload_prefixes_fit is None
    assert load.peak_per_s == pytest.approx(load.rates.total_per_s)
    assert load.peak_per_s > load.rates.peak_per_s  # the bucket's, not the busiest prefix's
