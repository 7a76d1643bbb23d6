"""Traffic and its price: tiers, allowances, who pays for which copy."""

from __future__ import annotations

import pytest

from wanrl_s3.cost import egress
from wanrl_s3.cost.egress import Traffic
from wanrl_s3.cost.prices import EgressTier, PriceBook

LADDER = (EgressTier(10.0, 0.10), EgressTier(50.0, 0.05), EgressTier(None, 0.01))
GIB = 1.073741824  # decimal GB in one GiB
DAY_S = 86_400.0


@pytest.mark.parametrize(
    ("volume_gb", "usd"),
    [(0.0, 0.0), (5.0, 0.5), (10.0, 1.0), (30.0, 1.0 + 20 * 0.05), (100.0, 1.0 + 2.0 + 0.5)],
)
def test_tiers_price_each_slice_at_its_own_rate(volume_gb: float, usd: float) -> None:
    assert egress.tiered_usd(volume_gb, LADDER) == pytest.approx(usd)


def test_a_run_longer_than_a_month_spreads_its_volume(prices: PriceBook) -> None:
    aws = prices.provider("aws")
    volume_gb = 30_000.0  # past the first 10 TiB tier in one month
    one_month = egress.effective_egress_usd_per_gb(volume_gb, DAY_S, aws)
    three_months = egress.effective_egress_usd_per_gb(volume_gb, 3 * egress.SECONDS_PER_MONTH, aws)
    # Three months of 10,000 GB, each with its own 100 GiB free and inside the $0.09 tier.
    assert three_months == pytest.approx(3 * (10_000 - 100 * GIB) * 0.09 / GIB / volume_gb)
    assert one_month < three_months  # the big month climbed into cheaper tiers


def test_the_allowance_covers_each_months_first_gigabytes() -> None:
    # 20 GB free take the whole 10 GB first tier and 10 GB of the second; 10 GB left at 0.05.
    assert egress.month_usd(30.0, LADDER, free_gb=20.0) == pytest.approx(10 * 0.05)
    assert egress.month_usd(15.0, LADDER, free_gb=20.0) == 0.0
    # Proration: a 1.5-month run gets 1.5 allowances. 60 GB over 1.5 months is 40 GB a month:
    # 20 free, 20 at 0.05, so 1.0 a month and 1.5 for the run.
    run_s = 1.5 * egress.SECONDS_PER_MONTH
    rate = egress.effective_usd_per_gb(60.0, run_s, LADDER, free_gb_per_month=20.0)
    assert rate * 60.0 == pytest.approx(1.5 * 20 * 0.05)
    # A run shorter than a month gets the whole month's allowance (one billing month).
    assert egress.effective_usd_per_gb(20.0, DAY_S, LADDER, free_gb_per_month=20.0) == 0.0


def test_aws_and_azure_give_100_gb_a_month_and_the_flag_takes_it_back(prices: PriceBook) -> None:
    aws, azure = prices.provider("aws"), prices.provider("azure")
    assert egress.effective_egress_usd_per_gb(100 * GIB, DAY_S, aws) == 0.0
    assert egress.effective_egress_usd_per_gb(100.0, DAY_S, azure) == 0.0  # decimal GB
    without = egress.effective_egress_usd_per_gb(100.0, DAY_S, azure, account_allowance=False)
    assert without == pytest.approx(0.087)
    # Azure's first tier ends at 10,000 GB (not 10,240): 20,000 GB straddles it.
    assert egress.effective_egress_usd_per_gb(20_000.0, DAY_S, azure) * 20_000 == pytest.approx(
        (10_000 - 100) * 0.087 + 10_000 * 0.083
    )


def test_b2_egress_is_free_up_to_three_times_storage(prices: PriceBook) -> None:
    b2 = prices.provider("b2")
    assert egress.effective_egress_usd_per_gb(90.0, DAY_S, b2, stored_gb=30.0) == 0.0
    assert egress.effective_egress_usd_per_gb(180.0, DAY_S, b2, stored_gb=30.0) == pytest.approx(
        0.005
    )


def test_object_storage_upload_in_cloud_pays_only_for_extra_regions() -> None:
    t = egress.upload_traffic(16.4, 64.0, regions=3, replicate=False, trainer_in_storage_cloud=True)
    assert (t.trainer_egress_gb, t.inter_region_gb) == (0.0, pytest.approx(32.8))
    assert t.put_requests == 3 * (257 + 2)  # 16.4 GB in 64 MB chunks, plus manifest and LATEST


def test_trainer_outside_the_storage_cloud_pays_per_copy_unless_replicating() -> None:
    per_region = egress.upload_traffic(
        16.4, 64.0, 3, replicate=False, trainer_in_storage_cloud=False
    )
    replicated = egress.upload_traffic(
        16.4, 64.0, 3, replicate=True, trainer_in_storage_cloud=False
    )
    assert per_region.trainer_egress_gb == pytest.approx(3 * 16.4)
    assert (replicated.trainer_egress_gb, replicated.inter_region_gb) == pytest.approx((16.4, 32.8))


def test_downloads_and_polling_count_gets_per_worker() -> None:
    t = egress.download_traffic(0.82, 64.0, workers=5) + egress.polling_traffic(5, 3000.0, 10.0)
    assert t.storage_egress_gb == pytest.approx(4.1)
    # the reader's ranged GETs (0.82 GB in 8 MiB: 98) and the manifest, per worker; its
    # listing of the version is billed with the PUTs
    assert t.get_requests == 5 * (98 + 1) + 5 * 300
    assert t.list_requests == 5
    spread = egress.download_traffic(0.82, 64.0, workers=5, payload_prefixes=4)
    assert spread.get_requests == 5 * (98 + 1)
    assert spread.list_requests == 5 * (1 + 4)  # its folder and the four payload prefixes


def test_transfer_and_requests_are_priced_at_the_run_rates(prices: PriceBook) -> None:
    aws = prices.provider("aws")
    run = Traffic(
        storage_egress_gb=100.0, inter_region_gb=10.0, put_requests=2000, get_requests=1e4
    )
    rates = egress.run_rates(run, egress.RunPricing(storage=aws, trainer=None, run_s=DAY_S))
    assert egress.transfer_usd(run, rates) == pytest.approx(
        (100 - 100 * GIB) * 0.0 + 10 * 0.02 / GIB  # 100 GB is inside the free 100 GiB
    )
    assert egress.requests_usd(run, rates) == pytest.approx(2 * 0.005 + 10 * 0.0004)


def test_storage_is_billed_by_gb_month_held(prices: PriceBook) -> None:
    aws = prices.provider("aws")
    held = egress.storage_usd(32.8, aws, egress.SECONDS_PER_MONTH / 2)
    assert held == pytest.approx(32.8 * 0.023 / GIB / 2)
    b2 = prices.provider("b2")  # repriced on 2026-05-01: $6.95 per decimal TB-month
    assert egress.storage_usd(1000.0, b2, egress.SECONDS_PER_MONTH) == pytest.approx(6.95)


def test_traffic_adds_and_scales() -> None:
    a = Traffic(storage_egress_gb=1.0, get_requests=2.0)
    assert (a + a.times(2)).storage_egress_gb == 3.0
    with pytest.raises(ValueError):
        Traffic(storage_egress_gb=-1.0)
