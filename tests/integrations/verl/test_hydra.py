"""Hydra composes verl's real trainer configs with our lines, and verl's loaders find our code.

Each command runs verl's (or our launcher's) real entry point with ``--cfg job``,
as a user would, in a subprocess (no GPU, model or network needed). The three
run in parallel: each spends most of its ~8 s importing verl.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from wanrl_s3.errors import UsageError
from wanrl_s3_verl.config import EngineSettings, FilterSettings

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "integrations" / "verl" / "README.md"
CONFIG_DIR = ROOT / "integrations" / "verl" / "config"
YAML_OVERRIDES = (
    "wanrl_s3.store_url=s3://my-bucket/runs/exp-7",
    "wanrl_s3.staleness=5",
    "wanrl_s3.publish_every=2",
    "wanrl_s3.endpoint_url=http://minio:9000",
    "data.train_batch_size=96",
    "actor_rollout_ref.rollout.n=4",
)
OVERRIDE = re.compile(r"^\s*(\+?[a-z_]+(?:\.[A-Za-z0-9_]+)+=\S+?)\s*\\?$")


def readme_overrides() -> list[str]:
    """The override lines of the README's block marked ``<!-- verl-overrides -->``."""
    text = README.read_text()
    block = text.split("<!-- verl-overrides -->", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [m.group(1) for line in block.splitlines() if (m := OVERRIDE.match(line))]


def start(module: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, "--cfg", "job", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def composed(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    return yaml.safe_load(out)


@pytest.fixture(scope="module")
def configs() -> dict[str, dict[str, Any]]:
    """The three compositions, started together."""
    overrides = readme_overrides()
    procs = {
        "readme": start("verl.trainer.main_ppo", *overrides),
        "yaml": start(
            "verl.trainer.main_ppo",
            f"--config-path={CONFIG_DIR}",
            "--config-name=wanrl_s3",
            "--resolve",
            *YAML_OVERRIDES,
        ),
        "fully_async": start(
            "wanrl_s3_verl.fully_async_main",
            *overrides[:3],
            "+wanrl_s3.message_queue.staleness=4",
            "+wanrl_s3.message_queue.store_url=s3://my-bucket/runs/exp-1",
        ),
    }
    return {name: composed(proc) for name, proc in procs.items()}


def engine_of(cfg: dict[str, Any]) -> dict[str, Any]:
    return cfg["actor_rollout_ref"]["rollout"]["checkpoint_engine"]


def test_readme_lines_compose_into_verls_trainer_config(configs: dict[str, Any]) -> None:
    assert len(readme_overrides()) == 9
    cfg = configs["readme"]
    engine = engine_of(cfg)
    assert engine["backend"] == "wanrl_s3"
    assert engine["custom_backend_module"] == "wanrl_s3_verl.backend"
    assert engine["engine_kwargs"] == {"wanrl_s3": {"store_url": "s3://my-bucket/runs/exp-1"}}
    v1 = cfg["trainer"]["v1"]
    assert v1["trainer_mode"] == "separate_async"
    assert v1["sampler"]["max_off_policy_threshold"] is None
    assert v1["sampler"]["custom_sampler"] == {
        "path": "pkg://wanrl_s3_verl.sampler",
        "name": "StalenessReplayBuffer",
    }
    assert v1["sampler"]["sampler_kwargs"] == {
        "staleness": 4,
        "store_url": "s3://my-bucket/runs/exp-1",
    }
    # every documented key is one our settings accept
    EngineSettings.from_mapping(engine["engine_kwargs"]["wanrl_s3"])
    FilterSettings.from_mapping(v1["sampler"]["sampler_kwargs"])


def test_our_yaml_extends_verls_trainer_config(configs: dict[str, Any]) -> None:
    cfg = configs["yaml"]
    engine = engine_of(cfg)
    kwargs = engine["engine_kwargs"]["wanrl_s3"]
    assert engine["backend"] == "wanrl_s3"
    assert kwargs["store_url"] == "s3://my-bucket/runs/exp-7"
    assert kwargs["endpoint_url"] == "http://minio:9000"
    assert kwargs["publish_every"] == 2
    assert (kwargs["publish_ranks"], kwargs["assign"]) == ("master", "balanced")
    sampler = cfg["trainer"]["v1"]["sampler"]
    assert sampler["sampler_kwargs"]["staleness"] == 5
    assert sampler["sampler_kwargs"]["store_url"] == "s3://my-bucket/runs/exp-7"
    assert cfg["trainer"]["v1"]["trainer_mode"] == "separate_async"
    assert cfg["actor_rollout_ref"]["actor"]["strategy"]  # the rest is verl's ppo_trainer
    settings = EngineSettings.from_mapping(kwargs)
    assert (settings.publish_every, settings.delta, settings.dtype) == (2, "auto", "bf16")
    assert FilterSettings.from_mapping(sampler["sampler_kwargs"]).staleness == 5


def test_fully_async_launcher_composes_verls_config(configs: dict[str, Any]) -> None:
    from omegaconf import OmegaConf

    from wanrl_s3_verl.fully_async_main import queue_settings

    cfg = configs["fully_async"]
    assert "async_training" in cfg  # verl's fully_async_ppo_trainer, not ppo_trainer
    assert engine_of(cfg)["backend"] == "wanrl_s3"
    settings = queue_settings(OmegaConf.create(cfg))
    assert (settings.staleness, settings.store_url) == (4, "s3://my-bucket/runs/exp-1")


@pytest.mark.filterwarnings("ignore:.*load_extern_type.*:FutureWarning")  # verl's own call
def test_verls_loaders_find_our_sampler_and_backend() -> None:
    """The calls verl makes: load_extern_type for the sampler, the import hook + get()."""
    from verl.checkpoint_engine.base import CheckpointEngineRegistry
    from verl.utils.import_utils import import_external_libs, load_extern_type

    from wanrl_s3_verl.sampler import StalenessReplayBuffer

    assert (
        load_extern_type("pkg://wanrl_s3_verl.sampler", "StalenessReplayBuffer")
        is StalenessReplayBuffer
    )
    import_external_libs("wanrl_s3_verl.backend")
    cls = CheckpointEngineRegistry.get("wanrl_s3")
    actor, rollout = cls.build_topology(3, 5, [{}] * 8)
    assert {k: len(v) for k, v in actor.items()} == {"rank": 3}
    assert {k: len(v) for k, v in rollout.items()} == {"rank": 5}


def test_a_wrong_key_names_itself_and_the_fix() -> None:
    with pytest.raises(UsageError, match=r"engine_kwargs\.wanrl_s3\.keyframe_interval is not"):
        EngineSettings.from_mapping({"store_url": "s3://b/p", "keyframe_interval": 8})
    with pytest.raises(UsageError, match=r"sampler_kwargs\.staleness.*force=true"):
        FilterSettings.from_mapping({"staleness": 2})


def test_node_share_dir_still_sets_the_host_cache_with_one_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old key of ``host_cache_dir`` (configs written for it keep working); the shipped
    YAML passes it as null when only the new key is set, which is no setting at all."""
    from wanrl_s3_verl import config

    monkeypatch.setattr(config, "_warned", set())
    old = {"store_url": "s3://b/p", "node_share_dir": "/dev/shm/wanrl-run"}
    assert EngineSettings.from_mapping(old).host_cache_dir == "/dev/shm/wanrl-run"
    EngineSettings.from_mapping(old)
    assert caplog.text.count("node_share_dir is deprecated: use") == 1
    new = {"store_url": "s3://b/p", "host_cache_dir": "/dev/shm/a", "node_share_dir": None}
    assert EngineSettings.from_mapping(new).host_cache_dir == "/dev/shm/a"
    with pytest.raises(UsageError, match=r"node_share_dir is the old name of .*host_cache_dir"):
        EngineSettings.from_mapping({**new, "node_share_dir": "/dev/shm/b"})


def _planned(cfg: dict[str, Any]) -> tuple[Any, ...]:
    """What the estimate reads, straight from a composed config."""
    rollout = cfg["actor_rollout_ref"]
    return (
        cfg["data"]["train_batch_size"],
        rollout["rollout"]["n"],
        cfg["trainer"]["total_training_steps"],
        rollout["model"]["path"],
    )


def test_the_estimate_reads_our_yaml_and_a_composed_dump_as_main_ppo_does(
    configs: dict[str, Any], tmp_path: Path
) -> None:
    """``config/wanrl_s3.yaml`` with overrides reads as ``main_ppo --cfg job`` composes it,
    and that command's output (unresolved: the README's lines) reads as itself."""
    from wanrl_s3_verl.trainer_config import read_verl_config

    ours = read_verl_config(CONFIG_DIR / "wanrl_s3.yaml", YAML_OVERRIDES)
    assert _planned(configs["yaml"])[:2] == (96, 4)
    assert (ours.prompts, ours.samples, ours.steps, ours.model_path) == _planned(configs["yaml"])
    dump = tmp_path / "job.yaml"
    dump.write_text(yaml.safe_dump(configs["readme"]), encoding="utf-8")
    job = read_verl_config(dump)
    assert (job.prompts, job.samples, job.steps, job.model_path) == _planned(configs["readme"])


def test_our_yaml_alone_names_the_model_key_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without overrides the model is verl's placeholder path: the estimate says which key."""
    from wanrl_s3_verl.trainer_config import missing_model_message, read_verl_config

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    run = read_verl_config(CONFIG_DIR / "wanrl_s3.yaml")
    assert run.params is None and run.prompts is not None
    message = missing_model_message(run, "wanrl_s3.yaml")
    assert message == (
        f"wanrl_s3.yaml: actor_rollout_ref.model.path is {run.model_path!r}: no config.json in "
        "that directory; set actor_rollout_ref.model.path=DIR_OR_HUB_ID, download its "
        "config.json, or pass --params"
    )
