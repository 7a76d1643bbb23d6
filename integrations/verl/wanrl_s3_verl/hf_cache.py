"""A model's ``config.json`` in the local Hugging Face cache, found offline.

verl's ``actor_rollout_ref.model.path`` is a directory or a Hub id
(``Qwen/Qwen2.5-7B``); for an id, the weights a run would load are in the cache
``huggingface_hub`` downloads into. This module finds that cache by the same
environment variables ``huggingface_hub`` reads, in the same order, and the
snapshot ``refs/main`` names, without importing it and without the network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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
