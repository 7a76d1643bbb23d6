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


def test_every_provider_the_issue_names_is_shipped_with_source_and_date(prices: PriceBook) -> None:
    assert set(prices.storage) >= {"aws", "gcs", "azure", "r2", "b2"}
    for provider in prices.storage.values():
        assert provider.source.startswith("https://")
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", provider.as_of)
    assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", _raw()["recorded"])


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
        (["storage", "aws", "put_usd_per_1000"], -1, "put"),
        (["storage", "aws", "storage_usd_per_gb_month"], "cheap", "must be a number"),
        (["storage", "aws", "inter_region_usd_per_gb"], KeyError, "missing key"),
        (["storage", "aws", "billed_gb_bytes"], 1024, "billed_gb_bytes"),
        (["storage", "aws", "egress_tiers", 1, "up_to_gb"], 100, "increase"),
        (["storage", "aws", "egress_tiers", 3, "up_to_gb"], 1e9, "null"),
        (["gpus", "usd_per_hour", "H100"], float("nan"), "finite"),
        (["storage"], {}, "no provider"),
        (["storage", "r2", "hosts_compute"], "no", "true or false"),
    ],
)
def test_a_broken_price_file_names_the_field(
    path: list[str | int], value: object, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        parse_prices(_broken(path, value))


def test_load_prices_from_a_user_file(tmp_path: Path) -> None:
    data = _raw()
    data["storage"]["aws"]["egress_tiers"] = [{"up_to_gb": None, "usd_per_gb": 0.05}]
    path = tmp_path / "quotes.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_prices(path).provider("aws").egress_tiers[0].usd_per_gb == pytest.approx(0.05 / GIB)


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
