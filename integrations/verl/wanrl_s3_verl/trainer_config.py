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
cache, offline (both through :func:`wanrl_s3.find_model_config` and
:func:`wanrl_s3.model_params`, which know no verl).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wanrl_s3 import find_model_config, model_params
from wanrl_s3.errors import UsageError

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
        return None if self.model_config is None else float(model_params(self.model_config))


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
    return find_model_config(raw, base_dir=source.parent)


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
    try:
        find_model_config(run.model_path, base_dir=Path(source).parent, required=True)
        where = "its config.json was not read"
    except UsageError as exc:
        where = str(exc).partition(": ")[2]
    return (
        f"{source}: {MODEL_KEY} is {run.model_path!r}: {where}; "
        f"set {MODEL_KEY}=DIR_OR_HUB_ID, download its config.json, or pass --params"
    )
