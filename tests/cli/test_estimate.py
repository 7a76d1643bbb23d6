"""``wanrl-s3 estimate`` through the real entry point: outputs and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wanrl_s3.cli import main

POINT_8B = ["estimate", "--params", "8.2e9", "--t-train-s", "1500", "--batch", "2048"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_for_the_8b_point(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *POINT_8B, "--t-bcast-s", "1437")
    assert (code, err) == (0, "")
    assert (
        "T_bcast 1437 s (measured): slack 1563 s, required pool 2.621 rollouts/s, 9 workers" in out
    )
    assert "floor (star-unlimited, 100 Mbps downlink): 1312 s full, 66 s delta" in out
    rows = [
        line[20:].split()
        for line in out.splitlines()
        if line.startswith(("object", "star", "peer"))
    ]
    assert [r[:4] for r in rows] == [
        ["1749", "s", "yes", "11"],
        ["87", "s", "yes", "5"],
        ["3936", "s", "no", "-"],
        ["1322", "s", "yes", "9"],
    ]
    assert out.rstrip().splitlines()[-1].startswith("recommendation: object storage delta")


def test_json_has_the_promised_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, *POINT_8B, "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["kappa"], data["staleness"], data["feasible"]) == (2, 3, True)
    assert f"{data['snapshot_gb']:.1f}" == "16.4"
    assert {"slack_s", "required_pool_rollouts_per_s", "workers_needed"} <= set(data)
    assert set(data["by_topology"]) == {
        "object_storage_full",
        "object_storage_delta",
        "star",
        "peer_chain",
    }
    assert data["by_topology"]["star"]["workers_needed"] is None


def test_infeasible_exits_5_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *POINT_8B, "--t-bcast-s", "3100")
    assert (code, out) == (5, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        "wanrl-s3: error: infeasible: broadcast 3100s does not fit in kappa*T_train = 3000s; "
        "raise kappa (and S), or cut T_bcast; fix: --kappa 3 (S=4)"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--params", "x", "--t-train-s", "1500", "--batch", "2048"],
        ["estimate", "--params", "8.2e9", "--batch", "2048"],
        [*POINT_8B, "--staleness", "2"],
        [*POINT_8B, "--staleness", "3", "--kappa", "2"],
        [*POINT_8B, "--t-train-s", "-5"],
        [*POINT_8B, "--density", "0"],
        [*POINT_8B, "--gamma", "0.9"],
        [*POINT_8B, "--provider", "s4"],
        [*POINT_8B, "--provider", "r2"],  # storage only: where does the trainer run?
        [*POINT_8B, "--trainer-gpus", "H100"],
        [*POINT_8B, "--worker-gpu", "TPUv9"],
        [*POINT_8B, "--prices", "/nonexistent/prices.json"],
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("wanrl-s3: error: ") and err.count("\n") == 1


def test_force_allows_s_below_3_and_large_s_warns(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, *POINT_8B, "--staleness", "2", "--force")[0] == 0
    code, _, err = run_cli(capsys, *POINT_8B, "--kappa", "9")
    assert code == 0 and "warning: staleness 10 is outside the measured stable envelope" in err


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "plan.png"
    code, out, _ = run_cli(capsys, *POINT_8B, "--plot", str(target))
    assert code == 0 and f"plot written to {target}" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_to_an_unwritable_path_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_cli(capsys, *POINT_8B, "--plot", str(tmp_path / "no" / "dir" / "p.png"))
    assert code == 2 and "cannot write plot" in err


def test_from_verl_config_names_the_command_that_replaced_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, *POINT_8B, "--from-verl-config", "run.yaml")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "python -m wanrl_s3_verl.estimate run.yaml" in err


def test_the_planner_reads_no_yaml() -> None:
    """The core parses no verl config: estimate imports neither PyYAML nor the adapter."""
    code = (
        "import sys; from wanrl_s3.cli import main; "
        "main(['estimate', '--params', '8.2e9', '--t-train-s', '1500', '--batch', '2048']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'wanrl_s3_verl')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"
