"""A model's size from its Hugging Face ``config.json``, found locally and offline.

A planner needs a parameter count before a run; a trainer config names the model
by a local directory or a Hub id (``Qwen/Qwen2.5-7B``). For an id, the file is in
the cache ``huggingface_hub`` downloads into: found here by the same environment
variables it reads, in the same order, and the snapshot ``refs/main`` names,
without importing it and without the network. The count itself is a pure
function of the config (:func:`wanrl_s3.cost.model_size.params_from_hf_config`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..cost.model_size import params_from_hf_config
from ..errors import UsageError

# A Hub model id: NAME or ORG/NAME (letters, digits, '-', '_', '.'), never a path.
_REPO_ID = re.compile(r"^(?![.~/])[\w.-]+(?:/[\w.-]+)?$")


def hub_cache_dir() -> Path:
    """``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface",
    )
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(os.path.expandvars(os.path.expanduser(hub or os.path.join(home, "hub"))))


def is_repo_id(text: str) -> bool:
    """Whether ``text`` reads as a Hub model id (``NAME`` or ``ORG/NAME``), not a path."""
    return bool(_REPO_ID.match(text)) and ".." not in text


def cached_config(repo_id: str, cache_dir: Path | None = None) -> Path | None:
    """The cached ``config.json`` of model ``repo_id``, or None if it is not cached.

    The snapshot is the one ``refs/main`` names, as ``huggingface_hub`` resolves
    it; where there is no such ref (a download pinned to a revision), the newest
    snapshot that holds a config.json.
    """
    if not is_repo_id(repo_id):
        return None
    repo = (cache_dir or hub_cache_dir()) / "--".join(["models", *repo_id.split("/")])
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        found = snapshots / ref.read_text(encoding="utf-8").strip() / "config.json"
        return found if found.is_file() else None
    candidates = sorted(
        (p for p in snapshots.glob("*/config.json") if p.is_file()),
        key=lambda p: p.parent.stat().st_mtime,
    )
    return candidates[-1] if candidates else None


def find_model_config(
    model: str, base_dir: Path | None = None, *, required: bool = False
) -> Path | None:
    """The config.json of ``model``: a directory (as given, or relative to ``base_dir``),
    else, for a Hub id, the local Hugging Face cache's.

    None where there is none; with ``required``, a UsageError that says where it looked.
    """
    path = Path(model).expanduser()
    for candidate in (path, *((base_dir / path,) if base_dir is not None else ())):
        if (candidate / "config.json").is_file():
            return candidate / "config.json"
    found = cached_config(model) if is_repo_id(model) else None
    if found is None and required:
        where = "in that directory"
        if is_repo_id(model):
            where += f" nor in the Hugging Face cache {hub_cache_dir()}"
        raise UsageError(f"model {model!r}: no config.json {where}")
    return found


def model_params(config_json: str | Path) -> int:
    """Parameter count of the dense decoder whose Hugging Face config.json is at the path."""
    try:
        config = json.loads(Path(config_json).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {config_json}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{config_json} is not valid JSON: {exc}") from exc
    if not isinstance(config, Mapping):
        raise UsageError(f"{config_json}: expected a JSON object")
    return params_from_hf_config(config, source=str(config_json))
