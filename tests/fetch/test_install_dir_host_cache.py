"""A host cache beside the install directory: a hard link where one can be made, and
one plain notice at start where one cannot (the host cache on a tmpfs, the directory on disk).

Real file systems: the host cache is a tmpfs mounted for the test (tests/tmpfs.py), the
install directory the test's own directory on another file system.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fetch.test_install_dir import FAST, holds, install_next, model
from tests.tmpfs import tmpfs
from wanrl_s3 import DirectoryInstaller, PublishConfig, Publisher, Subscriber, open_store
from wanrl_s3.cli import main
from wanrl_s3.testing import nudge_state

NOTICE = "installs copy each version"


def publish_two(tmp_path: Path) -> tuple[str, list]:
    url = f"file://{tmp_path}/bucket"
    pub = Publisher(open_store(url), PublishConfig(keyframe_every=10))
    states = [model(1)]
    states.append(nudge_state(states[0], 0.01, seed=2))
    pub.publish(states[0], 1)
    return url, states


def test_on_one_file_system_the_installed_file_is_the_cached_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, states = publish_two(tmp_path)
    cache, out = tmp_path / "cache", tmp_path / "policy"
    config = replace(FAST, host_cache_dir=str(cache))
    with (
        caplog.at_level(logging.INFO),
        Subscriber(open_store(url)) as sub,
        DirectoryInstaller(sub, out, config) as installer,
    ):
        install_next(installer)
        staged = installer.watcher.staged_path(1)
        assert staged is not None
        installed = out / "model.safetensors"
        assert installed.stat().st_ino == staged.stat().st_ino  # a hard link: no copy
        assert installed.stat().st_nlink == 2 and holds(installed, states[0])
    assert NOTICE not in caplog.text and "by copy" not in caplog.text


def test_a_host_cache_on_another_file_system_is_said_once_at_start_and_installs_by_copy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, states = publish_two(tmp_path)
    out = tmp_path / "policy"
    out.mkdir()
    with tmpfs(tmp_path / "shm", size_bytes=16 * 2**20) as shm:
        cache = shm / "wanrl-run1"
        config = replace(FAST, host_cache_dir=str(cache))
        with (
            caplog.at_level(logging.INFO),
            Subscriber(open_store(url)) as sub,
            DirectoryInstaller(sub, out, config) as installer,
        ):
            said = [r.getMessage() for r in caplog.records if NOTICE in r.getMessage()]
            assert len(said) == 1  # at start, before anything was downloaded
            assert f"the host cache {cache} is on tmpfs at {shm}" in said[0]
            assert "a hard link cannot cross file systems" in said[0]
            assert f"put {out} on the host cache's file system" in said[0]
            assert "load the cached file itself" in said[0]
            install_next(installer)
            Publisher(open_store(url), PublishConfig(keyframe_every=10)).publish(states[1], 2)
            install_next(installer)
            staged = installer.watcher.staged_path(2)
            assert staged is not None and staged.exists()
            installed = out / "model.safetensors"
            assert installed.stat().st_ino != staged.stat().st_ino  # a copy: it could not link
            assert holds(installed, states[1])
    notices = [r for r in caplog.records if NOTICE in r.getMessage() or "by copy" in r.getMessage()]
    assert len(notices) == 1  # once, not once per install


def test_the_workers_hook_is_told_the_cached_file(tmp_path: Path) -> None:
    url, states = publish_two(tmp_path)
    cache, out, env = tmp_path / "cache", tmp_path / "policy", tmp_path / "hook.env"
    hook = f'echo "$WANRL_S3_HOST_CACHE_PATH $WANRL_S3_PATH $WANRL_S3_SHARE_PATH" > {env}'
    argv = ["worker", "--store", url, "--out-dir", str(out), "--host-cache-dir", str(cache)]
    assert (
        main([*argv, "--poll-interval-s", "0.05", "--on-install", hook, "--exit-after", "1"]) == 0
    )
    cached_path, model_path, old_name = env.read_text().split()
    assert old_name == cached_path  # the variable's deprecated name, for hooks written for it
    assert Path(cached_path) == cache / f"{1:012d}.safetensors"
    assert os.path.samefile(cached_path, model_path) and holds(Path(cached_path), states[0])
