"""Reading a verl trainer config and the model's config.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3_verl.trainer_config import params_from_hf_config, read_verl_config

LLAMA_31_8B = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "tie_word_embeddings": False,
}  # fmt: skip
QWEN25_7B = {
    "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "vocab_size": 152064, "tie_word_embeddings": False,
}  # fmt: skip

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


@pytest.mark.parametrize(
    ("config", "published"), [(LLAMA_31_8B, 8_030_261_248), (QWEN25_7B, 7_615_616_512)]
)
def test_parameter_count_matches_the_published_one(config: dict, published: int) -> None:
    assert params_from_hf_config(config) == published


def test_moe_and_missing_fields_are_refused() -> None:
    with pytest.raises(UsageError, match="mixture-of-experts"):
        params_from_hf_config({**LLAMA_31_8B, "num_local_experts": 8})
    with pytest.raises(UsageError, match="hidden_size"):
        params_from_hf_config({k: v for k, v in LLAMA_31_8B.items() if k != "hidden_size"})


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


def test_interpolations_are_reported_by_key(tmp_path: Path) -> None:
    text = VERL_YAML.replace("train_batch_size: 128", "train_batch_size: ${oc.env:BATCH}")
    with pytest.raises(UsageError, match=r"data\.train_batch_size is an interpolation"):
        read_verl_config(write_run(tmp_path, yaml_text=text))


def test_a_hub_model_id_leaves_params_unknown(tmp_path: Path) -> None:
    run = read_verl_config(write_run(tmp_path, model="meta-llama/Llama-3.1-8B"))
    assert run.params is None and run.batch == 2048


def test_without_pyyaml_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # makes `import yaml` raise ImportError
    with pytest.raises(UsageError, match="pip install pyyaml"):
        read_verl_config(write_run(tmp_path))


def test_bad_yaml_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("data: [unclosed", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid YAML"):
        read_verl_config(path)
    with pytest.raises(UsageError, match="cannot read"):
        read_verl_config(tmp_path / "absent.yaml")
