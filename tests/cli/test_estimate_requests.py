"""`wanrl-s3 estimate`: peak reads a second per bucket prefix, the warning past the limit,
and what polling LATEST costs a month."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from wanrl_s3.cli import main

FLEET = ["estimate", "--params", "8.2e9", "--t-train-s", "150", "--batch", "2048"]
FLEET += ["--density", "0.01", "--region-count", "3", "--poll-interval-s", "10"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*FLEET, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_ten_thousand_workers_are_over_s3s_prefix_limit_with_the_remedy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--workers", "10000")
    assert code == 0
    assert "AWS S3 Standard, us-east-1 documents 5,500 reads/s per prefix (read 2026-12-05)" in out
    delta = next(line for line in out.splitlines() if line.startswith("  object storage delta"))
    assert delta.endswith("OVER") and "3,334 workers" in delta
    cdn = next(line for line in out.splitlines() if line.startswith("  CDN delta"))
    assert not cdn.endswith("OVER")
    warning = next(line for line in err.splitlines() if "object storage delta:" in line)
    assert "over AWS S3 Standard, us-east-1's 5,500 per prefix" in warning
    assert "poll every" in warning and "--poll-interval-s" in warning and "CDN" in warning
    # 10,000 workers every 10 s for 730 hours, at $0.0004 per 1,000 GETs
    assert "LATEST polls: 10,000 workers every 10 s = 1,000/s" in out
    assert "$1,051.20 a month" in out


def test_a_hundred_workers_are_under_it_and_json_carries_the_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--workers", "100", "--json")
    assert code == 0 and "reads/s" not in err
    requests = json.loads(out)["requests"]
    assert requests["limit_per_s"] == 5500 and requests["scope"] == "prefix"
    delta = requests["by_topology"]["object_storage_delta"]
    assert not delta["over"] and delta["workers_per_bucket"] == 34
    assert delta["peak_per_s"] == pytest.approx(
        delta["polls_per_s"] + delta["fetch_burst_per_s"] + delta["fetch_stream_per_s"]
    )
    assert requests["polls"]["usd_per_month"] == pytest.approx(100 * 730 * 3600 / 10 * 0.0004e-3)


def test_a_given_limit_is_checked_instead(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--workers", "100", "--read-limit-per-s", "100")
    assert code == 0 and "--read-limit-per-s 100 per prefix" in out
    assert "over AWS S3 Standard, us-east-1's 100 per prefix" in err


def test_a_provider_without_a_documented_limit_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--workers", "10000", "--provider", "r2", "--trainer-provider",
                         "aws")  # fmt: skip
    assert code == 0 and "Cloudflare R2 Standard documents no request limit" in out
    assert "reads/s" not in err


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_a_bad_limit_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, out, err = run(capsys, "--workers", "100", "--read-limit-per-s", value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--read-limit-per-s" in err


def test_a_misspelt_limit_in_a_price_file_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads(resources.files("wanrl_s3.cost").joinpath("prices.json").read_text("utf-8"))
    doc["storage"]["aws"]["request_limits"]["read_per_sec"] = 9000
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(doc))
    code, out, err = run(capsys, "--workers", "100", "--prices", str(mine))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "storage.aws.request_limits.read_per_sec is not a known key" in err


def test_the_warning_names_the_payload_prefixes_that_fit_and_with_them_none_is_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--workers", "10000", "--json")
    assert code == 0
    rows = json.loads(out)["requests"]["by_topology"]
    k = rows["object_storage_full"]["payload_prefixes_fit"]
    assert k > 1 and rows["object_storage_delta"]["payload_prefixes_fit"] <= k
    warning = next(line for line in err.splitlines() if "object storage full:" in line)
    assert f"remedy: deal the payload over {k} prefixes (publish --payload-prefixes {k}" in warning
    code, out, err = run(capsys, "--workers", "10000", "--payload-prefixes", str(k))
    assert code == 0 and "reads/s" not in err
    assert f"the payload over {k} prefixes" in out
    full = next(line for line in out.splitlines() if line.startswith("  object storage full"))
    assert "busiest payload prefix" in full and not full.endswith("OVER")
    code, out, err = run(capsys, "--workers", "10000", "--payload-prefixes", str(k - 1))
    assert code == 0 and "object storage full:" in err  # one fewer is not enough


@pytest.mark.parametrize("value", ["0", "-1", "x", "257"])
def test_bad_payload_prefixes_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, out, err = run(capsys, "--workers", "100", "--payload-prefixes", value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "payload" in err and "prefixes" in err
