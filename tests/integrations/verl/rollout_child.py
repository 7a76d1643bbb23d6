"""A rollout-side ``wanrl_s3`` engine in its own process, driven over stdin/stdout (JSON lines).

Started by test_backend.py with the rollout's ``checkpoint_engine`` config as
argv[1]; builds the engine the way verl's CheckpointEngineWorker does (import
hook, then the registry, kwargs as a DictConfig) and answers commands:
``prefetch`` (poll LATEST once, wait until that version is ready), ``sync``
(one ``receive_weights``: its duration and the BLAKE3 of every tensor's bytes),
``steps`` (the engine's global_steps -> version record) and ``quit``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from omegaconf import OmegaConf
from verl.checkpoint_engine.base import CheckpointEngineRegistry
from verl.utils.import_utils import import_external_libs

from tests.trainer.weights import digests


def reply(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def receive(engine: Any, global_steps: int) -> tuple[list[tuple[str, Any]], float]:
    """What verl's server adapter would consume, and how long handing it over took."""
    start = time.monotonic()
    got = [item async for item in engine.receive_weights(global_steps=global_steps)]
    return got, time.monotonic() - start


def prefetch(engine: Any, version: int, timeout_s: float) -> int | None:
    watcher = engine.rollout.watcher
    watcher.poll_once()
    deadline = time.monotonic() + timeout_s
    while watcher.ready_version != version and time.monotonic() < deadline:
        watcher.wait_ready(0.05)
    return watcher.ready_version


def sync(engine: Any, global_steps: int) -> dict[str, Any]:
    sync_at_s = engine.rollout.watcher.clock.time()  # the clock its installs are stamped by
    got, receive_s = asyncio.run(receive(engine, global_steps))
    installed = engine.rollout.last_install
    return {
        "digests": digests(got),
        "receive_s": receive_s,
        "sync_at_s": sync_at_s,
        "ready_at_s": None if installed is None else installed.ready_at_s,
        "installed": engine.rollout.watcher.installed_version,
        "download_s": None if installed is None else installed.download_s,
        "downloaded_bytes": None if installed is None else installed.downloaded_bytes,
    }


def main() -> None:
    cfg = OmegaConf.create(json.loads(sys.argv[1]))
    import_external_libs(cfg.custom_backend_module or None)
    engine = CheckpointEngineRegistry.new(
        cfg.backend,
        bucket_size=cfg.update_weights_bucket_megabytes << 20,
        **cfg.engine_kwargs.get(cfg.backend, {}),
    )
    reply({"ready": type(engine).__name__})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "prefetch":
            reply({"ready_version": prefetch(engine, cmd["version"], 60.0)})
        elif cmd["cmd"] == "sync":
            reply(sync(engine, cmd["global_steps"]))
        elif cmd["cmd"] == "steps":
            reply({"steps": {str(k): v for k, v in engine.steps().items()}})
        else:
            engine.close()
            reply({"bye": True})
            return


if __name__ == "__main__":
    main()
