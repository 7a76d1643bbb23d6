"""``wanrl-s3 estimate`` through the real entry point: outputs and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wanrl_s3.cli import main

from .test_verl_config import write_run

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
        ["estimate", "--from-verl-config", "/nonexistent.yaml", "--t-train-s", "1500"],
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


def test_from_verl_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    yaml_path = write_run(tmp_path)
    code, out, _ = run_cli(
        capsys, "estimate", "--from-verl-config", str(yaml_path), "--t-train-s", "1500", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert (data["inputs"]["params"], data["inputs"]["batch"], data["steps"]) == (
        8_030_261_248.0,
        2048,
        200,
    )
    # An explicit flag beats the config.
    code, out, _ = run_cli(
        capsys,
        "estimate",
        "--from-verl-config",
        str(yaml_path),
        "--t-train-s",
        "1500",
        "--batch",
        "1024",
        "--json",
    )
    assert json.loads(out)["inputs"]["batch"] == 1024


def test_from_verl_config_without_a_local_model_needs_params(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    yaml_path = write_run(tmp_path, model="meta-llama/Llama-3.1-8B")
    code, _, err = run_cli(
        capsys, "estimate", "--from-verl-config", str(yaml_path), "--t-train-s", "1500"
    )
    assert code == 2 and "pass --params" in err
