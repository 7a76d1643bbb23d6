"""Read what the planner needs from a verl trainer config and the model's config.json.

Used by ``python -m wanrl_s3_verl.estimate`` (:mod:`wanrl_s3_verl.estimate`); it lives
in the adapter, not in the core, because it knows verl's config keys. The file is
composed by Hydra as ``main_ppo`` composes it, so the two kinds a user has read
alike: a primary config with a ``defaults`` list (``config/wanrl_s3.yaml``, which
extends verl's ``ppo_trainer``: verl's defaults fill what it does not set), and a
composed one (``main_ppo ... --cfg job`` output). Overrides (``key=value``) apply on
top, as on ``main_ppo``'s command line; interpolations are resolved, and one that
cannot be is reported by key. The parameter count is computed from the
architecture of a dense decoder (Llama, Qwen2, Mistral...) in the model's
config.json, found in a local directory or, for a Hub id, in the local Hugging Face
cache (:mod:`wanrl_s3_verl.hf_cache`, offline); mixture-of-experts configs are
refused because their active and total counts differ and the formula would be
silently wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wanrl_s3.errors import UsageError

from .hf_cache import cached_config, hub_cache_dir, is_repo_id

_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")
BATCH_KEY = "data.train_batch_size"
SAMPLES_KEY = "actor_rollout_ref.rollout.n"
STEPS_KEY = "trainer.total_training_steps"
MODEL_KEY = "actor_rollout_ref.model.path"
_ABSENT = object()


@dataclass(frozen=True)
class VerlRun:
    """What a verl config says about the run; ``None`` where it does not say.

    ``model_config`` is the config.json the parameter count comes from (a local
    directory's, or the Hugging Face cache's), ``model_path`` the config's value.
    """

    prompts: int | None
    samples: int
    steps: int | None
    model_path: str | None
    model_config: Path | None = None

    @property
    def batch(self) -> int | None:
        """Trajectories per step: prompts per batch x samples per prompt."""
        return None if self.prompts is None else self.prompts * self.samples

    @property
    def params(self) -> float | None:
        """The model's parameter count, read when asked for (a flag may make it moot)."""
        return None if self.model_config is None else params_from_hf_config_file(self.model_config)


def _positive_int(value: Any, where: str) -> int:
    """Counts and sizes are integers >= 1 (a bool or a float is a mistake in the file)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where} must be a positive integer, got {value!r}")
    return value


def _compose(path: Path, overrides: Sequence[str]) -> Any:
    """The config as ``main_ppo --config-path DIR --config-name NAME overrides`` composes it."""
    try:
        import yaml  # type: ignore[import-untyped, unused-ignore]
        from hydra import compose, initialize_config_dir
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException
    except ImportError as exc:
        raise UsageError(
            "reading a verl config needs Hydra: pip install 'wanrl-s3[verl]' "
            "(or pass --params, --batch and --steps as flags)"
        ) from exc
    if not path.is_file():
        raise UsageError(f"cannot read verl config {path}: no such file")
    if path.suffix != ".yaml":
        raise UsageError(f"{path}: Hydra reads configs named *.yaml; rename it")
    try:
        with initialize_config_dir(str(path.resolve().parent), version_base=None):
            return compose(config_name=path.stem, overrides=list(overrides))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from exc
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        hint = " (is verl installed? its configs come with it)" if "ppo_trainer" in text else ""
        raise UsageError(f"{path}: {text}{hint}") from exc


def _get(cfg: Any, dotted: str, source: Path) -> Any:
    """The value at ``a.b.c``, interpolations resolved; None where it is absent or ``???``."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        value = OmegaConf.select(cfg, dotted, default=_ABSENT, throw_on_missing=False)
    except OmegaConfBaseException as exc:
        raise UsageError(
            f"{source}: {dotted} cannot be resolved ({str(exc).splitlines()[0]}); "
            f"set it ({dotted}=VALUE after the file) or pass the value as a flag"
        ) from exc
    return None if value is _ABSENT else value


def _count(cfg: Any, dotted: str, source: Path) -> int | None:
    """A positive integer at ``dotted``, or None where the config does not set it."""
    value = _get(cfg, dotted, source)
    return None if value is None else _positive_int(value, f"{source}: {dotted}")


def _model_config(raw: Any, source: Path) -> Path | None:
    """The config.json of ``model.path``: in that directory (as given, or relative to the
    config file), else, for a Hub id, in the local Hugging Face cache."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise UsageError(f"{source}: {MODEL_KEY} must be a string, got {raw!r}")
    path = Path(raw).expanduser()
    for candidate in (path, source.parent / path):
        if (candidate / "config.json").is_file():
            return candidate / "config.json"
    return cached_config(raw) if is_repo_id(raw) else None


def read_verl_config(path: str | Path, overrides: Sequence[str] = ()) -> VerlRun:
    """Batch (train_batch_size x rollout.n), total steps and the model parameter count."""
    source = Path(path)
    cfg = _compose(source, overrides)
    prompts = _count(cfg, BATCH_KEY, source)
    samples = _count(cfg, SAMPLES_KEY, source) or 1
    raw_model = _get(cfg, MODEL_KEY, source)
    model_config = _model_config(raw_model, source)
    return VerlRun(
        prompts=prompts,
        samples=samples,
        steps=_count(cfg, STEPS_KEY, source),
        model_path=raw_model,
        model_config=model_config,
    )


def missing_model_message(run: VerlRun, source: str | Path) -> str:
    """Why no parameter count: the key unset, or no config.json where it points."""
    if run.model_path is None:
        return (
            f"{source}: {MODEL_KEY} is not set; set it ({MODEL_KEY}=DIR_OR_HUB_ID) or pass --params"
        )
    where = "in that directory"
    if is_repo_id(run.model_path):
        where += f" nor in the Hugging Face cache {hub_cache_dir()}"
    return (
        f"{source}: {MODEL_KEY} is {run.model_path!r}: no config.json {where}; "
        f"set {MODEL_KEY}=DIR_OR_HUB_ID, download its config.json, or pass --params"
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
