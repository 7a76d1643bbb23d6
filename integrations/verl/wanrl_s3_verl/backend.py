"""verl checkpoint-engine backend ``wanrl_s3``: weight sync through an S3-compatible bucket.

Importing this module registers the backend, which is exactly what verl's
``custom_backend_module`` hook does in every process that builds an engine::

    actor_rollout_ref.rollout.checkpoint_engine.backend=wanrl_s3
    actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=wanrl_s3_verl.backend
    +actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.wanrl_s3.store_url=s3://b/run

verl builds the engine on two kinds of process (notes/verl-0.9.1.md, section 3):

* trainer ranks pass ``is_master``: the master publishes each sync's weights (cast to
  bf16, an XOR delta against its last publication, keyframes as configured) as
  version ``global_steps``, by default on a background thread once they are copied to
  host memory (:mod:`wanrl_s3_verl.trainer_side`); the other ranks drain verl's
  generator, whose FSDP all-gathers need every rank in lockstep;
* rollout ranks (``CheckpointEngineWorker``) pass no ``is_master``: a background
  :class:`~wanrl_s3.watch.Watcher` keeps the newest verified version in host memory,
  and ``receive_weights`` hands over whatever is ready without waiting for a
  download (invariant 7), recording what it installed at which step for the
  staleness filters (:mod:`wanrl_s3_verl.versions`).

No process group is needed: the bucket is the rendezvous.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

from wanrl_s3 import (
    InstallResult,
    Snapshot,
    Subscriber,
    Verifier,
    WatchConfig,
    Watcher,
    return_big_buffers,
    to_torch,
)
from wanrl_s3.errors import UsageError

from .config import EngineSettings
from .trainer_side import TrainerSide, Weights
from .versions import StepStatusWriter

log = logging.getLogger(__name__)
BACKEND = "wanrl_s3"


class RolloutSide:
    """Background prefetch; each sync installs the newest ready version at once."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        if settings.return_big_buffers:
            return_big_buffers()
        store, self.region = settings.read_store()
        verifier = Verifier.from_file(settings.verify_key) if settings.verify_key else None
        self.subscriber = Subscriber(store, concurrency=settings.concurrency, verifier=verifier)
        self.worker_id = settings.rollout_worker_id()
        self.status = StepStatusWriter(store, self.worker_id, region=self.region)
        # the engine copies every tensor out at receive_weights and keeps none (it says
        # so: done_with), so in memory the next version is decoded into the installed
        # one's arrays: one copy
        watch = WatchConfig(
            poll_interval_s=settings.poll_interval_s,
            share_dir=settings.node_share_dir,
            reuse_installed=settings.node_share_dir is None,
        )
        self.watcher = Watcher(self.subscriber, watch).start()
        self.last_install: InstallResult | None = None

    async def take(self, global_steps: int | None) -> Snapshot | None:
        """The newest ready version, or None to keep the current weights.

        Waits (off the event loop) only while this engine holds no version at all.
        """
        if self.watcher.held_version is None and self.settings.wait_for_first_s > 0:
            got = await asyncio.to_thread(self.watcher.wait_ready, self.settings.wait_for_first_s)
            if got is None:
                log.warning(
                    "wanrl_s3: no version reached %s within wait_for_first_s=%g; "
                    "the rollout engine keeps the weights it loaded",
                    self.settings.where,
                    self.settings.wait_for_first_s,
                )
        taken: list[Snapshot] = []
        result = self.watcher.install(sink=taken.append)
        if result is not None:
            self.last_install = result
            log.info(
                "wanrl_s3: step %s installs v%d (%d bytes via %s, ready %.2f s before)",
                global_steps,
                result.version,
                result.downloaded_bytes,
                result.path,
                result.installed_at_s - result.ready_at_s,
            )
        if global_steps is not None:
            self.status.synced(global_steps, self.watcher.installed_version, result)
        return taken[0] if taken else None

    def close(self) -> None:
        self.watcher.stop()
        self.status.close()
        self.subscriber.close()


@CheckpointEngineRegistry.register(BACKEND)
class WanrlS3CheckpointEngine(CheckpointEngine):
    """The ``wanrl_s3`` backend; settings in ``engine_kwargs.wanrl_s3`` (config.EngineSettings)."""

    wire_format = "named_tensors"

    def __init__(
        self, bucket_size: int, is_master: bool | None = None, **engine_kwargs: Any
    ) -> None:
        """``is_master`` is given on trainer ranks only; without it this is a rollout engine.

        ``bucket_size`` (verl's transfer bucket) means nothing to a bucket store and is kept
        only for the record.
        """
        if isinstance(bucket_size, bool) or not isinstance(bucket_size, int):
            raise UsageError(f"bucket_size must be an integer, got {bucket_size!r}")
        self.bucket_size = bucket_size
        self.settings = EngineSettings.from_mapping(engine_kwargs)
        self.rank: int | None = None
        self.trainer: TrainerSide | None = None
        self.rollout: RolloutSide | None = None
        if is_master is None:
            self.rollout = RolloutSide(self.settings)
        else:
            self.trainer = TrainerSide(self.settings, bool(is_master))

    @property
    def role(self) -> str:
        return "rollout" if self.rollout is not None else "trainer"

    # -- the per-sync protocol: nothing to set up, the bucket is the rendezvous ----------
    def prepare(self) -> dict[str, Any]:
        return {"backend": BACKEND, "role": self.role}

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict[str, Any]]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        """Each rank learns only its rank: lists of exactly the lengths verl checks."""
        return (
            {"rank": list(range(actor_wg_world_size))},
            {"rank": list(range(rollout_world_size))},
        )

    def init_process_group(self, rank: int | None = None, **_: Any) -> None:
        self.rank = rank

    def finalize(self) -> None:
        """verl calls this after every sync: a background publication keeps running."""
        return None

    # -- the transfer --------------------------------------------------------------------
    async def send_weights(
        self, weights: Weights, global_steps: int | None = None
    ) -> dict[str, float]:
        """Publish (master, on publication syncs) or drain; returns metrics for verl's log."""
        if self.trainer is None:
            raise UsageError(
                "send_weights was called on a rollout engine (built without "
                "is_master); verl builds trainer engines with is_master"
            )
        return self.trainer.send(weights, global_steps)

    # verl annotates receive_weights as a coroutine returning a generator, but its engines
    # (NCCL's) are async generators and its worker wraps either kind: so is this one.
    async def receive_weights(  # type: ignore[override]
        self, global_steps: int | None = None
    ) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        """The newest ready version's tensors; nothing (keep the weights) if none is newer."""
        if self.rollout is None:
            raise UsageError(
                "receive_weights was called on a trainer engine (built with "
                "is_master); rollout engines are built without it"
            )
        snapshot = await self.rollout.take(global_steps)
        if snapshot is None:
            return
        # a staged version (node_share_dir) maps files: once the engine has copied a
        # tensor, its pages go back (they stay in the page cache), so the host holds a
        # tensor at a time, not the version (docs/verl.md, host memory)
        try:
            for name, array in snapshot.items(release_pages=True):
                yield name, to_torch(array)
        finally:  # copied (or abandoned): the next version may be decoded into these arrays
            self.rollout.watcher.done_with(snapshot)

    # -- for operators and tests (reachable through verl's execute_checkpoint_engine) -------
    def held_version(self) -> int | None:
        """The newest version this rollout engine has installed or has ready to install."""
        if self.rollout is None:
            raise UsageError("held_version is a rollout engine's method")
        return self.rollout.watcher.held_version

    def steps(self) -> dict[int, int | None]:
        """What this rollout engine held after each sync: ``global_steps -> version``."""
        if self.rollout is None:
            raise UsageError("steps is a rollout engine's method")
        self.rollout.status.flush()
        return dict(self.rollout.status.steps)

    def wait_published(self, timeout_s: float | None = None) -> dict[str, float] | None:
        """Trainer master: wait for the background publication and return its figures.

        None if it is still running after ``timeout_s``; {} when there is none (or
        ``background`` is off); raises ``PublicationFailedError`` if it failed.
        """
        if self.trainer is None:
            raise UsageError("wait_published is a trainer engine's method")
        return self.trainer.wait_published(timeout_s)

    def close(self) -> None:
        """Stop the background threads (verl never calls this; tests and exit hooks do).

        A trainer's publication in flight is given ``close_wait_s`` to finish; at
        interpreter exit that happens without a call (see :mod:`.background`).
        """
        if self.rollout is not None:
            self.rollout.close()
        if self.trainer is not None:
            self.trainer.close()
