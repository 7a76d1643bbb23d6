"""The Hugging Face cache found by huggingface_hub's own rules, offline, and read as it reads it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.cost.test_model_size import LLAMA_31_8B
from wanrl_s3.io.hf_model import cached_config, hub_cache_dir, is_repo_id


def hf_snapshot(cache: Path, repo_id: str, config: dict, revision: str = "0123abcd") -> Path:
    """A model in a Hugging Face cache laid out as huggingface_hub lays it out."""
    repo = cache / "--".join(["models", *repo_id.split("/")])
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    found = repo / "snapshots" / revision / "config.json"
    found.parent.mkdir(parents=True, exist_ok=True)
    found.write_text(json.dumps(config), encoding="utf-8")
    return found


ENV = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "~/.cache/huggingface/hub"),
        ({"XDG_CACHE_HOME": "/x"}, "/x/huggingface/hub"),
        ({"XDG_CACHE_HOME": "/x", "HF_HOME": "/h"}, "/h/hub"),
        ({"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy"}, "/legacy"),
        ({"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HUB_CACHE": "/c"}, "/c"),
    ],
)
def test_the_cache_directory_follows_huggingface_hubs_order(
    env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert hub_cache_dir() == Path(os.path.expanduser(expected))


def test_the_snapshot_is_the_one_huggingface_hub_returns(tmp_path: Path) -> None:
    """refs/main names the snapshot; an older one beside it is not read."""
    from huggingface_hub import try_to_load_from_cache

    hf_snapshot(tmp_path, "meta-llama/Llama-3.1-8B", {"old": True}, revision="1111")
    found = hf_snapshot(tmp_path, "meta-llama/Llama-3.1-8B", LLAMA_31_8B, revision="2222")
    assert cached_config("meta-llama/Llama-3.1-8B", tmp_path) == found
    theirs = try_to_load_from_cache("meta-llama/Llama-3.1-8B", "config.json", cache_dir=tmp_path)
    assert Path(str(theirs)) == found
    assert cached_config("meta-llama/Llama-3.1-70B", tmp_path) is None


def test_without_refs_main_the_newest_snapshot_is_read(tmp_path: Path) -> None:
    old = hf_snapshot(tmp_path, "org/m", LLAMA_31_8B, revision="aaaa")
    new = hf_snapshot(tmp_path, "org/m", LLAMA_31_8B, revision="bbbb")
    (tmp_path / "models--org--m" / "refs" / "main").unlink()
    past = time.time() - 3600
    os.utime(old.parent, (past, past))
    assert cached_config("org/m", tmp_path) == new


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("Qwen/Qwen2.5-7B", True),
        ("gpt2", True),
        ("/abs/path", False),
        ("~/models/x", False),
        ("./local", False),
        ("a/b/c", False),
        ("org/..", False),
    ],
)
def test_only_a_hub_id_is_looked_up(text: str, ok: bool) -> None:
    assert is_repo_id(text) is ok
