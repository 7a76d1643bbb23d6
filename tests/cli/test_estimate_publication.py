"""`wanrl-s3 estimate --full-ratio / --trainer-ranks / --trainer-uplink-gbps` through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wanrl_s3.cli import main

POINT_70B = ["estimate", "--params", "70e9", "--t-train-s", "1500", "--batch", "2048"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*POINT_70B, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def line(out: str, start: str) -> str:
    return next(text for text in out.splitlines() if text.startswith(start))


def test_the_text_names_the_ratio_it_used(capsys: pytest.CaptureFixture[str]) -> None:
    _, default, _ = run(capsys)
    assert line(default, "full versions") == (
        "full versions at 0.671x raw (--full-ratio): 93.9 GB each "
        "(fleet start, joins, keyframes, star and chain pushes); deltas ship as coded"
    )
    assert "floor (star-unlimited, 100 Mbps downlink): 7515 s full, 560 s delta" in default
    _, raw, _ = run(capsys, "--full-ratio", "1")
    assert line(raw, "full versions").startswith("full versions at 1x raw (--full-ratio): 140.0 GB")
    assert "downlink): 11200 s full, 560 s delta" in raw


def test_the_publish_line_shows_the_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    _, page, _ = run(capsys, "--full-ratio", "1")
    assert line(page, "publish").startswith(
        "publish (bucket rows, until visible): 3733 s full, 187 s delta: one upload at 300 Mbps;"
    )
    _, one, _ = run(capsys, "--full-ratio", "1", "--trainer-uplink-gbps", "10")
    assert line(one, "publish") == (
        "publish (bucket rows, until visible): 112 s full, 5.8 s delta: one trainer rank at "
        "10 Gbit/s if the store's endpoint keeps up (it may saturate first), then a 0.15 s commit"
    )
    _, eight, _ = run(
        capsys, "--trainer-ranks", "8", "--trainer-uplink-gbps", "10", "--region-count", "2"
    )
    assert line(eight, "publish").startswith(
        "publish (bucket rows, until visible): 19 s full, 1.5 s delta: 8 trainer ranks x "
        "10 Gbit/s = 80 Gbit/s to each of 2 buckets if the store's endpoint keeps up"
    )


def test_json_carries_the_ratio_and_each_rows_publish_term(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--trainer-ranks", "8", "--trainer-uplink-gbps", "10", "--json")
    plan = json.loads(out)
    assert code == 0 and (plan["full_ratio"], round(plan["full_gb"], 2)) == (0.671, 93.94)
    inputs, rows = plan["inputs"], plan["by_topology"]
    assert (inputs["trainer_ranks"], inputs["trainer_uplink_gbps"]) == (8, 10.0)
    assert rows["object_storage_full"]["publish_s"] == pytest.approx(93.94 * 8 / 80 + 0.15)
    assert rows["object_storage_delta"]["publish_s"] == pytest.approx(7.0 * 8 / 80 + 0.15)
    assert rows["star"]["publish_s"] == rows["peer_chain"]["publish_s"] == 0.0


@pytest.mark.parametrize(
    "argv",
    [
        ["--full-ratio", "0"],
        ["--full-ratio", "-0.5"],
        ["--full-ratio", "1.2"],
        ["--full-ratio", "nan"],
        ["--full-ratio", "inf"],
        ["--full-ratio", "most"],
        ["--trainer-ranks", "0", "--trainer-uplink-gbps", "10"],
        ["--trainer-ranks", "-3", "--trainer-uplink-gbps", "10"],
        ["--trainer-ranks", "2.5", "--trainer-uplink-gbps", "10"],
        ["--trainer-ranks", "eight", "--trainer-uplink-gbps", "10"],
        ["--trainer-ranks", "8"],  # a rank count without a rate models nothing
        ["--trainer-uplink-gbps", "0"],
        ["--trainer-uplink-gbps", "-10"],
        ["--trainer-uplink-gbps", "nan"],
        ["--trainer-uplink-gbps", "inf"],
        ["--trainer-uplink-gbps", "10G"],
        ["--trainer-uplink-gbps", "10", "--upload-mbps", "500"],
    ],
)
def test_bad_publication_flags_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("wanrl-s3: error: ") and err.count("\n") == 1
    flag = argv[0]  # named as the flag (argparse) or as the input it sets (the planner)
    assert flag in err or flag.lstrip("-").replace("-", "_") in err


def test_a_bad_ratio_is_one_line_from_the_installed_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wanrl_s3.cli", *POINT_70B, "--full-ratio", "nan"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr == "wanrl-s3: error: full_ratio must be in (0, 1] (stored over raw bytes "
        "of a full snapshot), got nan\n"
    )
