"""The shipped price file: dated, sourced, converted to decimal GB, and strictly validated."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from wanrl_s3.cost.prices import PriceBook, load_prices, parse_prices
from wanrl_s3.errors import UsageError

SHIPPED = Path(__file__).resolve().parents[2] / "wanrl_s3" / "cost" / "prices.json"
GIB = 2**30 / 1e9  # decimal GB in one GiB


def _raw() -> dict[str, Any]:
    return json.loads(SHIPPED.read_text(encoding="utf-8"))


def test_every_entry_carries_its_source_and_read_date(prices: PriceBook) -> None:
    assert set(prices.storage) >= {"aws", "gcs", "azure", "r2", "b2"}
    assert set(prices.cdns) >= {"cloudfront", "cloud_cdn", "cloudflare"}
    for key, entry in prices.entries().items():
        assert entry.source.startswith("https://"), key
        assert entry.read_on.isoformat() == _raw_entry(key)["read_on"]
        assert entry.source_note, key
        # An unconfirmed figure says so, and names where it came from and when that was read.
        note = entry.source_note.lower()
        for at in [m.start() for m in re.finditer("not confirmed", note)]:
            clause = note[at:].split(". ")[0]
            assert "not confirmed against the provider's page; from " in clause, (key, clause)
            assert re.search(r"read \d{4}-\d{2}-\d{2}", clause), (key, clause)


def _raw_entry(key: str) -> dict[str, Any]:
    node: Any = _raw()
    for part in key.split("."):
        node = node[part]
    return node  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("provider", "unit_bytes"),
    [("aws", 2**30), ("gcs", 2**30), ("azure", 10**9), ("r2", 10**9), ("b2", 10**9)],
)
def test_each_provider_states_its_billed_unit(
    prices: PriceBook, provider: str, unit_bytes: int
) -> None:
    assert prices.provider(provider).billed_gb_bytes == unit_bytes


def test_the_corrections_the_issue_lists(prices: PriceBook) -> None:
    b2 = prices.provider("b2")  # repriced 2026-05-01: $6.95/TB-month, API calls free
    assert (b2.storage_usd_per_gb_month, b2.put_usd_per_1000, b2.get_usd_per_1000) == (
        pytest.approx(6.95 / 1000),
        0.0,
        0.0,
    )
    aws = prices.provider("aws")  # per region pair: us-east-1 -> us-east-2 is $0.01/GiB
    assert aws.inter_region_rate(("us-east-2",)) == pytest.approx(0.01 / GIB)
    assert aws.inter_region_rate(("us-west-2",)) == pytest.approx(0.02 / GIB)
    gcs = prices.provider("gcs")  # Premium Tier ladder: 0-1 TiB, 1-10 TiB, over 10 TiB
    assert [t.up_to_gb for t in gcs.egress_tiers] == [
        pytest.approx(1024 * GIB),
        pytest.approx(10240 * GIB),
        None,
    ]
    azure = prices.provider("azure")  # the first tier ends at 10,000 GB, not 10,240
    assert azure.egress_tiers[0].up_to_gb == 10_000


def test_free_allowances_are_in_the_table(prices: PriceBook) -> None:
    assert prices.provider("aws").free_egress_gb_per_month == pytest.approx(100 * GIB)
    assert prices.provider("b2").free_egress_storage_multiple == 3
    assert prices.cdn("cloudfront").free_egress_gb_per_month == pytest.approx(1024 * GIB)
    # Bandwidth-alliance and same-cloud routes: the edges fetch for free.
    assert prices.cdn("cloudflare").fill_usd_per_gb == {"r2": 0.0, "b2": 0.0}
    assert prices.cdn("cloudfront").fill_usd_per_gb == {"aws": 0.0}
    assert prices.cdn("cloud_cdn").fill_usd_per_gb["gcs"] == pytest.approx(0.01 / GIB)


def test_gpu_prices_are_the_reference_pages(prices: PriceBook) -> None:
    assert dict(prices.gpu_usd_per_hour) == {"A100-80GB": 3.06, "H100": 2.90, "RTX-5090": 0.35}


def test_per_gib_prices_are_converted_to_decimal_gb(prices: PriceBook) -> None:
    aws = prices.provider("aws")
    assert aws.egress_tiers[0].usd_per_gb == pytest.approx(0.09 / GIB)
    assert aws.egress_tiers[0].up_to_gb == pytest.approx(10240 * GIB)
    assert aws.put_usd_per_1000 == 0.005  # requests are counted, not sized
    b2 = prices.provider("b2")  # decimal GB on the list: unchanged
    assert b2.egress_tiers[0].usd_per_gb == 0.01


def test_r2_has_no_egress_fee_and_no_compute(prices: PriceBook) -> None:
    r2 = prices.provider("r2")
    assert all(t.usd_per_gb == 0.0 for t in r2.egress_tiers)
    assert not r2.hosts_compute and prices.provider("aws").hosts_compute


def _broken(path: list[str | int], value: object) -> dict[str, Any]:
    data = copy.deepcopy(_raw())
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["storage", "aws", "put_usd_per_1000"], -1, "storage.aws.put_usd_per_1000 must be"),
        (["storage", "aws", "storage_usd_per_gb_month"], "cheap", "must be a number >= 0"),
        (["storage", "aws", "inter_region"], KeyError, "storage.aws.inter_region is missing: add"),
        (["storage", "aws", "read_on"], KeyError, "storage.aws.read_on is missing: add it (the"),
        (["storage", "aws", "read_on"], "2025-01", "read_on must be a date written YYYY-MM-DD"),
        (["storage", "aws", "source"], "aws.amazon.com", "source must be an https:// URL"),
        (["storage", "aws", "billed_gb_bytes"], 1024, "billed_gb_bytes must be 1000000000"),
        (["storage", "aws", "egress_tiers", 1, "up_to_gb"], 100, "increase"),
        (["storage", "aws", "egress_tiers", 3, "up_to_gb"], 1e9, "null"),
        (["storage", "aws", "egress_tiers", 0, "usd_per_GB"], 0.05, "egress_tiers[0].usd_per_GB"),
        (["storage", "aws", "egres_tiers"], [], "storage.aws.egres_tiers is not a known key"),
        (["storage", "aws", "inter_region", "to", "us-east-2"], None, "to.us-east-2 must be"),
        (["gpus", "usd_per_hour", "H100"], float("nan"), "gpus.usd_per_hour.H100"),
        (["storage"], {}, "no provider"),
        (["storage", "r2", "hosts_compute"], "no", "true or false"),
        (["cdns", "cloudfront", "origins", "s4"], 0.0, "origins.s4 names no storage provider"),
        (["schema"], 1, "reads schema 2"),
    ],
)
def test_a_broken_price_file_names_the_key_and_the_fix(
    path: list[str | int], value: object, message: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as caught:
        parse_prices(_broken(path, value))
    assert "\n" not in str(caught.value)


def test_load_prices_from_a_user_file(tmp_path: Path) -> None:
    data = _raw()
    data["storage"]["aws"]["egress_tiers"] = [{"up_to_gb": None, "usd_per_gb": 0.05}]
    data["storage"]["aws"]["read_on"] = "2026-11-30"
    path = tmp_path / "quotes.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    aws = load_prices(path).provider("aws")
    assert aws.egress_tiers[0].usd_per_gb == pytest.approx(0.05 / GIB)
    assert aws.provenance.read_on.isoformat() == "2026-11-30"


def test_unreadable_or_invalid_files_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        load_prices(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_prices(bad)


def test_unknown_provider_names_the_known_ones(prices: PriceBook) -> None:
    with pytest.raises(UsageError, match="aws, azure, b2, gcs, r2"):
        prices.provider("s4")
    with pytest.raises(UsageError, match="cloud_cdn, cloudflare, cloudfront, or none"):
        prices.cdn("akamai")
