"""``wanrl-s3 prices``: the table with sources and read dates, as text and as a price file."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from wanrl_s3.cli import main
from wanrl_s3.cli import prices as prices_cli
from wanrl_s3.cli.app import build_parser
from wanrl_s3.cost.prices import load_prices

SHIPPED = Path(__file__).resolve().parents[2] / "wanrl_s3" / "cost" / "prices.json"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_entry_is_printed_with_its_source_and_date(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "prices")
    assert (code, err) == (0, "")
    for key, entry in load_prices().entries().items():
        assert f"\n{key}  " in out or f"\n{key}\n" in out, key
        assert f"  read {entry.read_on.isoformat()} from {entry.source}\n" in out, key
    assert "internet egress per GiB: first 100 GiB a month free; to 10,240 GiB $0.09;" in out
    assert "internet egress per GB: free up to 3x the data stored; above $0.01" in out
    assert "inter-region from us-east-1: $0.02/GiB (us-east-2 $0.01," in out
    assert "requests $0.0075 per 10,000; cache fill from gcs $0.01/GiB" in out


def test_json_is_the_table_itself_and_loads_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "prices", "--json")
    assert code == 0
    assert json.loads(out) == json.loads(SHIPPED.read_text("utf-8"))
    copy = tmp_path / "mine.json"
    copy.write_text(out, encoding="utf-8")  # the documented way to start a negotiated file
    code, again, _ = run_cli(capsys, "prices", "--prices", str(copy), "--json")
    assert (code, again) == (0, out)


def test_stale_entries_are_marked(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser(["prices"]).parse_args(["prices"])
    assert prices_cli.run(args, today=date(2027, 6, 3)) == 0
    out, _ = capsys.readouterr()
    heads = [line for line in out.splitlines() if line and not line.startswith(" ")]
    stale = sorted(line.split()[0] for line in heads if line.endswith("STALE"))
    assert stale == ["gpus"]  # read 2026-12-02; every other entry 2026-12-03
    assert "today 2027-06-03" in heads[0]


def test_a_user_file_with_a_bad_key_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = json.loads(SHIPPED.read_text("utf-8"))
    data["cdns"]["cloudfront"]["request_usd_per_1000"] = 0.001
    path = tmp_path / "quotes.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = run_cli(capsys, "prices", "--prices", str(path))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "cdns.cloudfront.request_usd_per_1000 is not a known key" in err
    assert "request_usd_per_10000" in err  # the known keys name the right one
