"""Helpers the engine tests share: verl's way of building an engine, a trainer's weights.

Weights are fp32 master weights like a trainer's; ``gen`` is verl's per-tensor
generator; ``publish`` is one sync followed by the wait for its publication (in
the background by default), so a test can assert on what was committed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import torch
from verl.checkpoint_engine.base import CheckpointEngineRegistry
from verl.utils.import_utils import import_external_libs

from wanrl_s3 import Subscriber
from wanrl_s3.store import open_store

from .weights import as_published, digests

ROOT = Path(__file__).resolve().parents[3]

MODULE = "wanrl_s3_verl.backend"


def new_engine(**kwargs: Any) -> Any:
    """What verl does on every process that builds an engine: the import hook, then new()."""
    import_external_libs(MODULE)
    return CheckpointEngineRegistry.new("wanrl_s3", bucket_size=2048 << 20, **kwargs)


def model(seed: int = 0, big: int = 6_000_000) -> dict[str, torch.Tensor]:
    """fp32 master weights like a trainer's, plus an integer buffer; ~14 MB in bf16."""
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed.weight": torch.randn(big, generator=g),
        "model.layers.0.mlp.weight": torch.randn(1000, 1000, generator=g),
        "model.layers.0.norm.weight": torch.ones(1000),
        "model.rotary.inv_freq": torch.rand(64, generator=g, dtype=torch.float64),
        "model.position_ids": torch.arange(512),
    }


def step(weights: dict[str, torch.Tensor], seed: int) -> None:
    """An optimizer step that moves about 1% of the parameters (a sparse bf16 change)."""
    g = torch.Generator().manual_seed(1000 + seed)
    for t in weights.values():
        if t.is_floating_point():
            flat = t.view(-1)
            idx = torch.randint(0, flat.numel(), (max(1, flat.numel() // 100),), generator=g)
            flat[idx] += 0.5


def gen(weights: dict[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """verl's per-tensor generator: a fresh full tensor per name."""
    for name, t in weights.items():
        yield name, t.clone()


def expected(weights: dict[str, torch.Tensor]) -> dict[str, str]:
    """What the rollout must receive: floating tensors cast to bf16, bits included."""
    return digests(as_published(weights))


def send(engine: Any, weights: dict[str, torch.Tensor], global_steps: int) -> dict[str, float]:
    return asyncio.run(engine.send_weights(gen(weights), global_steps=global_steps))


def publish(engine: Any, weights: dict[str, torch.Tensor], global_steps: int) -> dict[str, float]:
    """One sync, then the publication's figures once it is done (in the background or not)."""
    metrics = send(engine, weights, global_steps)
    return engine.wait_published(60.0) or metrics


def delete_bucket(engine_kwargs: dict[str, Any]) -> None:
    """The store goes away (an outage): the run's bucket and everything in it."""
    import boto3

    bucket = boto3.resource("s3", endpoint_url=engine_kwargs["endpoint_url"]).Bucket(
        engine_kwargs["store_url"].split("/")[2]
    )
    bucket.objects.all().delete()
    bucket.delete()


def reader(store_url: str, endpoint_url: str) -> Subscriber:
    """A reader of the store straight from the S3 server (no fault proxy in between)."""
    return Subscriber(open_store(store_url, endpoint_url=endpoint_url))


def latest_version(sub: Subscriber) -> int | None:
    """The version LATEST names, None before the first commit."""
    pointer = sub.latest()
    return None if pointer is None else pointer.version


class ChildProcess:
    """A test's helper process (``python -m module``): JSON commands in, JSON replies out."""

    def __init__(self, module: str, arg: dict[str, Any], stderr: IO[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(arg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=ROOT,
        )

    def ask(self, **cmd: Any) -> Any:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the child process died"
        return json.loads(line)

    def read(self) -> Any:
        assert self.proc.stdout
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.ask(cmd="quit")
        self.proc.wait(30)
