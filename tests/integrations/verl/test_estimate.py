"""`python -m wanrl_s3_verl.estimate`: a verl YAML into `wanrl-s3 estimate`, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_trainer_config import write_run

COMMAND = [sys.executable, "-m", "wanrl_s3_verl.estimate"]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, *argv], capture_output=True, text=True, timeout=120)


def test_the_config_fills_params_batch_and_steps(tmp_path: Path) -> None:
    done = run(str(write_run(tmp_path)), "--t-train-s", "1500", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    data = json.loads(done.stdout)
    assert (data["inputs"]["params"], data["inputs"]["batch"], data["steps"]) == (
        8_030_261_248.0,
        2048,  # train_batch_size 128 x rollout.n 16
        200,
    )


def test_an_explicit_flag_beats_the_config(tmp_path: Path) -> None:
    done = run(str(write_run(tmp_path)), "--t-train-s", "1500", "--batch=1024", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["inputs"]["batch"] == 1024


def test_the_table_is_the_planners(tmp_path: Path) -> None:
    done = run(str(write_run(tmp_path)), "--t-train-s", "1500")
    assert done.returncode == 0
    assert "snapshot 16.1 GB (8.03e+09 params x 2 B)" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("recommendation: ")


def test_a_hub_model_id_needs_params(tmp_path: Path) -> None:
    yaml_path = write_run(tmp_path, model="meta-llama/Llama-3.1-8B")
    done = run(str(yaml_path), "--t-train-s", "1500")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "pass --params" in done.stderr
    given = run(str(yaml_path), "--t-train-s", "1500", "--params", "8B", "--json")
    assert given.returncode == 0 and json.loads(given.stdout)["inputs"]["params"] == 8e9


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        (["/nonexistent.yaml", "--t-train-s", "1500"], 2, "cannot read verl config"),
        (["--t-train-s", "1500"], 2, "give the verl trainer YAML first"),
        ([], 2, "give the verl trainer YAML first"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], status: int, says: str) -> None:
    done = run(*argv)
    assert (done.returncode, done.stdout) == (status, "")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert says in done.stderr


def test_the_planners_own_errors_come_through(tmp_path: Path) -> None:
    done = run(str(write_run(tmp_path)))  # no --t-train-s: the YAML does not say it
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "wanrl-s3: error: --t-train-s is required\n"
