"""Read what the planner needs from a verl trainer config and the model's config.json.

Used by ``python -m wanrl_s3_verl.estimate`` (:mod:`wanrl_s3_verl.estimate`); it lives
in the adapter, not in the core, because it knows verl's config keys and needs PyYAML.
Only plain values are read: a Hydra interpolation (``${...}``) cannot be
resolved without the rest of the user's configuration, so it is reported by key
instead of guessed. The parameter count is computed from the architecture of a
dense decoder (Llama, Qwen2, Mistral...); mixture-of-experts configs are
refused because their active and total counts differ and the formula would be
silently wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wanrl_s3.errors import UsageError

_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")


@dataclass(frozen=True)
class VerlRun:
    """What a verl config says about the run; ``None`` where it does not say."""

    params: float | None
    batch: int | None
    steps: int | None
    model_path: Path | None


def _get(tree: Any, dotted: str, source: Path) -> Any:
    """Walk ``a.b.c``; None where any level is missing. Interpolations are refused."""
    node = tree
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    if isinstance(node, str) and "${" in node:
        raise UsageError(
            f"{source}: {dotted} is an interpolation ({node}); pass the value as a flag"
        )
    return node


def _positive_int(value: Any, where: str) -> int:
    """Counts and sizes are integers >= 1 (a bool or a float is a mistake in the file)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where} must be a positive integer, got {value!r}")
    return value


def _count(tree: Any, dotted: str, source: Path) -> int | None:
    """A positive integer at ``dotted``, or None where the config does not set it."""
    value = _get(tree, dotted, source)
    return None if value is None else _positive_int(value, f"{source}: {dotted}")


def _load_yaml(path: Path) -> Any:
    try:
        import yaml  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:
        raise UsageError(
            "reading a verl config needs PyYAML: pip install pyyaml (or pass the values as flags)"
        ) from exc
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read verl config {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {exc}") from exc


def _resolve_model_dir(raw: Any, source: Path) -> Path | None:
    """A local model directory, tried as given, then relative to the config file."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise UsageError(f"{source}: actor_rollout_ref.model.path must be a string, got {raw!r}")
    path = Path(raw).expanduser()
    for candidate in (path, source.parent / path):
        if (candidate / "config.json").is_file():
            return candidate
    return path


def read_verl_config(path: str | Path) -> VerlRun:
    """Batch (train_batch_size x rollout.n), total steps and the model parameter count."""
    source = Path(path)
    tree = _load_yaml(source)
    if not isinstance(tree, Mapping):
        raise UsageError(f"{source}: expected a YAML mapping at the top level")
    prompts = _count(tree, "data.train_batch_size", source)
    samples = _count(tree, "actor_rollout_ref.rollout.n", source)
    model_dir = _resolve_model_dir(_get(tree, "actor_rollout_ref.model.path", source), source)
    params = None
    if model_dir is not None and (model_dir / "config.json").is_file():
        params = params_from_hf_config_file(model_dir / "config.json")
    return VerlRun(
        params=params,
        batch=None if prompts is None else prompts * (samples or 1),
        steps=_count(tree, "trainer.total_training_steps", source),
        model_path=model_dir,
    )


def params_from_hf_config_file(path: str | Path) -> float:
    """Parameter count of the model whose Hugging Face config.json is at ``path``."""
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(config, Mapping):
        raise UsageError(f"{path}: expected a JSON object")
    return float(params_from_hf_config(config, source=str(path)))


def _dim(config: Mapping[str, Any], key: str, source: str) -> int:
    return _positive_int(config.get(key), f"{source}: {key}")


def params_from_hf_config(config: Mapping[str, Any], source: str = "config.json") -> int:
    """Dense decoder parameters: embeddings, attention (GQA), gated MLP, norms, lm head.

    Biases on q/k/v are counted where the architecture has them (Qwen2, or an
    explicit ``attention_bias``); with them, Qwen2.5-7B and Llama-3.1-8B come
    out at their published counts to the parameter.
    """
    if any(config.get(key) for key in _MOE_KEYS):
        raise UsageError(f"{source}: mixture-of-experts configs are not supported; pass --params")
    hidden, inter, layers, vocab = (
        _dim(config, k, source)
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size")
    )
    heads = _dim(config, "num_attention_heads", source)
    kv_heads = heads  # plain multi-head attention when the key is absent
    if "num_key_value_heads" in config:
        kv_heads = _dim(config, "num_key_value_heads", source)
    head_dim = _dim(config, "head_dim", source) if config.get("head_dim") else hidden // heads
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    if config.get("attention_bias") or config.get("model_type") == "qwen2":
        attention += (heads + 2 * kv_heads) * head_dim
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    return layers * per_layer + embeddings + hidden
