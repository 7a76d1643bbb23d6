"""Reading a verl trainer config and the model's config.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cost.test_model_size import LLAMA_31_8B, QWEN25_7B
from tests.io.test_hf_model import hf_snapshot
from wanrl_s3.errors import UsageError
from wanrl_s3_verl.trainer_config import read_verl_config

VERL_YAML = """\
data:
  train_batch_size: 128
actor_rollout_ref:
  model:
    path: {model}
  rollout:
    n: 16
trainer:
  total_training_steps: 200
"""


def write_run(tmp_path: Path, model: str = "model", yaml_text: str = VERL_YAML) -> Path:
    """A verl YAML next to a model directory holding Llama-3.1-8B's config.json."""
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA_31_8B), encoding="utf-8")
    path = tmp_path / "ppo_trainer.yaml"
    path.write_text(yaml_text.replace("{model}", model), encoding="utf-8")
    return path


def test_reads_batch_steps_and_params_relative_to_the_yaml(tmp_path: Path) -> None:
    run = read_verl_config(write_run(tmp_path))
    assert (run.batch, run.steps, run.params) == (2048, 200, 8_030_261_248.0)


def test_interpolations_are_resolved_or_reported_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = VERL_YAML.replace("n: 16", "n: ${oc.decode:${oc.env:SAMPLES}}")
    monkeypatch.delenv("SAMPLES", raising=False)
    with pytest.raises(UsageError, match=r"actor_rollout_ref\.rollout\.n cannot be resolved"):
        read_verl_config(write_run(tmp_path, yaml_text=text))
    monkeypatch.setenv("SAMPLES", "8")
    assert read_verl_config(write_run(tmp_path, yaml_text=text)).batch == 128 * 8


def test_overrides_apply_as_on_main_ppos_command_line(tmp_path: Path) -> None:
    path = write_run(tmp_path)
    run = read_verl_config(path, ["data.train_batch_size=64", "+trainer.extra=1"])
    assert (run.prompts, run.samples, run.batch) == (64, 16, 1024)
    with pytest.raises(UsageError, match=r"Could not override 'data\.nokey'.*\+data\.nokey=3"):
        read_verl_config(path, ["data.nokey=3"])


def test_a_hub_model_id_is_found_in_the_local_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id verl would load from the Hub: its config.json in the cache, offline."""
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    path = write_run(tmp_path, model="Qwen/Qwen2.5-7B")
    assert read_verl_config(path).params is None  # not cached: unknown, not guessed
    found = hf_snapshot(cache, "Qwen/Qwen2.5-7B", QWEN25_7B)
    run = read_verl_config(path)
    assert (run.params, run.model_config) == (7_615_616_512.0, found)


def test_a_local_directory_wins_over_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    hf_snapshot(tmp_path / "hub", "model", QWEN25_7B)  # the id "model" is cached too
    run = read_verl_config(write_run(tmp_path))  # model.path: model, a directory beside it
    assert run.params == 8_030_261_248.0


def test_without_hydra_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "hydra", None)  # makes `import hydra` raise ImportError
    with pytest.raises(UsageError, match=r"needs Hydra: pip install 'wanrl-s3\[verl\]'"):
        read_verl_config(write_run(tmp_path))


def test_bad_yaml_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("data: [unclosed", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid YAML"):
        read_verl_config(path)
    with pytest.raises(UsageError, match="cannot read"):
        read_verl_config(tmp_path / "absent.yaml")
    with pytest.raises(UsageError, match=r"\*\.yaml; rename it"):
        read_verl_config(path.rename(tmp_path / "bad.yml"))


def test_a_moe_model_is_refused_only_when_its_count_is_needed(tmp_path: Path) -> None:
    path = write_run(tmp_path)
    (tmp_path / "model" / "config.json").write_text(
        json.dumps({**LLAMA_31_8B, "num_local_experts": 8}), encoding="utf-8"
    )
    run = read_verl_config(path)  # --params given: the batch is still read
    assert run.batch == 2048
    with pytest.raises(UsageError, match="mixture-of-experts"):
        _ = run.params
