"""`python -m wanrl_s3_verl.estimate`: a verl YAML into `wanrl-s3 estimate`, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_trainer_config import QWEN25_7B, VERL_YAML, hf_snapshot, write_run

PROG = "python -m wanrl_s3_verl.estimate"
COMMAND = [sys.executable, "-m", "wanrl_s3_verl.estimate"]
ROOT = Path(__file__).resolve().parents[3]
OUR_YAML = ROOT / "integrations" / "verl" / "config" / "wanrl_s3.yaml"


def run(*argv: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it; with ``home``, HOME and the Hugging Face cache there."""
    env = dict(os.environ)
    if home is not None:
        env.update(HOME=str(home), HF_HUB_CACHE=str(home / "hub"))
    return subprocess.run(
        [*COMMAND, *argv], capture_output=True, text=True, timeout=180, env=env, check=False
    )


def test_the_config_fills_params_batch_and_steps(tmp_path: Path) -> None:
    path = write_run(tmp_path)
    done = run(str(path), "--t-train-s", "1500", "--json")
    assert (done.returncode, done.stderr) == (
        0,
        f"{PROG}: from {path}: --params 8030261248 ({tmp_path / 'model' / 'config.json'}); "
        "--batch 2048 (data.train_batch_size 128 x actor_rollout_ref.rollout.n 16); "
        "--steps 200 (trainer.total_training_steps)\n",
    )
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


def test_a_hub_model_id_not_in_the_cache_needs_params(tmp_path: Path) -> None:
    yaml_path = write_run(tmp_path, model="meta-llama/Llama-3.1-8B")
    done = run(str(yaml_path), "--t-train-s", "1500", home=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"{PROG}: error: {yaml_path}: actor_rollout_ref.model.path is 'meta-llama/Llama-3.1-8B': "
        f"no config.json in that directory nor in the Hugging Face cache {tmp_path / 'hub'}; "
        "set actor_rollout_ref.model.path=DIR_OR_HUB_ID, download its config.json, or pass "
        "--params\n"
    )
    given = run(str(yaml_path), "--t-train-s", "1500", "--params", "8B", "--json", home=tmp_path)
    assert given.returncode == 0 and json.loads(given.stdout)["inputs"]["params"] == 8e9


def test_our_own_yaml_plans_with_overrides(tmp_path: Path) -> None:
    """config/wanrl_s3.yaml composes over verl's ppo_trainer as main_ppo composes it, the
    overrides apply, and the model comes from the Hugging Face cache (test_hydra.py checks
    the composition against main_ppo's, and what it says without a model)."""
    hf_snapshot(tmp_path / "hub", "Qwen/Qwen2.5-7B", QWEN25_7B)
    overrides = [
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B",
        "data.train_batch_size=128",
        "actor_rollout_ref.rollout.n=8",
    ]
    done = run(str(OUR_YAML), *overrides, "--t-train-s", "1500", "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    inputs = json.loads(done.stdout)["inputs"]
    assert (inputs["params"], inputs["batch"], inputs["steps"]) == (7_615_616_512.0, 1024, 100)
    found = tmp_path / "hub" / "models--Qwen--Qwen2.5-7B" / "snapshots" / "0123abcd"
    assert done.stderr == (
        f"{PROG}: from {OUR_YAML}: --params 7615616512 ({found / 'config.json'}); "
        "--batch 1024 (data.train_batch_size 128 x actor_rollout_ref.rollout.n 8); "
        "trainer.total_training_steps not set: --steps keeps its default\n"
    )


def test_a_missing_batch_is_named_by_its_key(tmp_path: Path) -> None:
    text = VERL_YAML.replace("data:\n  train_batch_size: 128\n", "")
    done = run(str(write_run(tmp_path, yaml_text=text)), "--t-train-s", "1500")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.endswith(
        ": data.train_batch_size is not set; set it (data.train_batch_size=N after the file) "
        "or pass --batch\n"
    )


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
    assert done.stderr.splitlines()[-1] == (
        "wanrl-s3: error: estimate: the following arguments are required: --t-train-s"
    )
