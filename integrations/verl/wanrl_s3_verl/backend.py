"""verl checkpoint-engine backend ``wanrl_s3``: weight sync through an S3-compatible bucket.

Importing this module registers the backend, which is exactly what verl's
``custom_backend_module`` hook does in every process that builds an engine::

    actor_rollout_ref.rollout.checkpoint_engine.backend=wanrl_s3
    actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=wanrl_s3_verl.backend
    +actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.wanrl_s3.store_url=s3://b/run

verl builds the engine on two kinds of process (notes/verl-0.9.1.md, section 3):

* trainer ranks pass ``is_master``: the master publishes each sync's weights (cast to
  bf16, an XOR delta against its last publication, keyframes as configured) as
  version ``global_steps``; the other ranks drain verl's generator, whose FSDP
  all-gathers need every rank in lockstep;
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
from collections.abc import AsyncGenerator, Generator, Iterator
from typing import Any

import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

from wanrl_s3 import (
    InstallResult,
    PublishConfig,
    Publisher,
    PublishResult,
    Signer,
    Snapshot,
    Subscriber,
    Verifier,
    WatchConfig,
    Watcher,
    resume,
    to_torch,
)
from wanrl_s3.errors import StoreError, UsageError, VersionConflictError

from .clock import ClockTicker
from .config import EngineSettings
from .versions import StepStatusWriter

log = logging.getLogger(__name__)
BACKEND = "wanrl_s3"
METRIC_PREFIX = "wanrl_s3/"
Weights = Generator[tuple[str, torch.Tensor], None, None]


def cast_floating(
    weights: Iterator[tuple[str, torch.Tensor]], dtype: str
) -> Iterator[tuple[str, torch.Tensor]]:
    """verl's tensors in the trainer's storage dtype; floating ones cast to bf16 unless "keep"."""
    for name, tensor in weights:
        if dtype == "bf16" and tensor.is_floating_point() and tensor.dtype != torch.bfloat16:
            tensor = tensor.to(torch.bfloat16)
        yield name, tensor


def drain(weights: Iterator[Any]) -> None:
    """Run verl's generator to its end: each step may be a collective every rank must join."""
    for _ in weights:
        pass


class TrainerSide:
    """Publishes from the master rank; every rank keeps verl's generator in lockstep."""

    def __init__(self, settings: EngineSettings, is_master: bool) -> None:
        self.settings = settings
        self.is_master = is_master
        self.syncs = 0
        self.reached_store = False  # a publication went through (or found the version there)
        self.publisher: Publisher | None = None
        self.clock = ClockTicker()
        if is_master:
            signer = Signer.from_file(settings.signing_key) if settings.signing_key else None
            self.publisher = Publisher(
                settings.publish_stores(),
                PublishConfig(
                    delta=settings.delta,
                    keyframe_every=settings.keyframe_every,
                    concurrency=settings.concurrency,
                ),
                signer=signer,
                keep_base=True,
            )

    def publishes_at(self, global_steps: int | None) -> bool:
        """The first sync of this process, then every ``publish_every`` steps (kappa)."""
        if self.syncs == 0:
            return True
        step = self.syncs if global_steps is None else global_steps
        return step % self.settings.publish_every == 0

    def send(self, weights: Weights, global_steps: int | None) -> dict[str, float]:
        metrics = self._send(weights, global_steps)
        if self.is_master and global_steps is not None:
            self.clock.tick(global_steps)  # the learner now holds this version
        return metrics

    def _send(self, weights: Weights, global_steps: int | None) -> dict[str, float]:
        publish = self.publishes_at(global_steps)
        self.syncs += 1
        if self.publisher is None:
            drain(weights)
            return {}
        if not publish:
            drain(weights)
            return {METRIC_PREFIX + "published": 0.0}
        version = global_steps if global_steps is not None else self.syncs - 1
        try:
            if self.syncs == 1:
                self._resume()  # inside the try: a failure drains verl's generator all the same
            result = self.publisher.publish(
                cast_floating(weights, self.settings.dtype),
                version,
                metadata={"verl_global_steps": str(global_steps)},
            )
        except VersionConflictError as exc:
            drain(weights)
            self.reached_store = True
            log.warning(
                "wanrl_s3: not publishing step %s: %s (a resumed run: the store "
                "already holds this version or a newer one)",
                global_steps,
                exc,
            )
            return {METRIC_PREFIX + "published": 0.0}
        except StoreError as exc:
            drain(weights)
            if not self.reached_store:  # a bad URL or credentials: fail at once, loudly
                raise StoreError(
                    f"wanrl_s3: the first publication to {self.settings.where} failed: {exc}"
                ) from exc
            log.error(  # an outage mid-run: ride it out, the staleness filter bounds the cost
                "wanrl_s3: publication of step %s failed, rollout keeps its current "
                "weights until the next one: %s",
                global_steps,
                exc,
            )
            return {METRIC_PREFIX + "published": 0.0, METRIC_PREFIX + "failed": 1.0}
        except BaseException:
            drain(weights)
            raise
        self.reached_store = True
        return publish_metrics(result)

    def _resume(self) -> None:
        """A restarted trainer continues from the store's newest version: deltas, not a keyframe.

        The versions the store already holds past this process's step were published
        by the run before the restart; their numbers are verl steps (the staleness
        filters' clock), so this process skips them and publishes from the next step
        on, as a delta against the newest of them.
        """
        if self.publisher is None or self.settings.delta == "never":
            return
        point = resume(self.publisher)
        if point is not None:
            self.reached_store = True
            log.info(
                "wanrl_s3: resuming from v%d in %s: the next publication is a delta against it",
                point.version,
                self.settings.where,
            )


def publish_metrics(result: PublishResult) -> dict[str, float]:
    """Numbers only: verl's loggers and MetricsAggregator reduce numeric values."""
    density = 1.0 if result.density is None else result.density
    return {
        METRIC_PREFIX + key: float(value)
        for key, value in (
            ("published", 1),
            ("version", result.version),
            ("is_delta", result.kind == "delta"),
            ("publish_s", result.seconds),
            ("stored_bytes", result.stored_bytes),
            ("raw_bytes", result.raw_bytes),
            ("density", density),
        )
    }


class RolloutSide:
    """Background prefetch; each sync installs the newest ready version at once."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        store, self.region = settings.read_store()
        verifier = Verifier.from_file(settings.verify_key) if settings.verify_key else None
        self.subscriber = Subscriber(store, concurrency=settings.concurrency, verifier=verifier)
        self.worker_id = settings.rollout_worker_id()
        self.status = StepStatusWriter(store, self.worker_id, region=self.region)
        watch = WatchConfig(
            poll_interval_s=settings.poll_interval_s, share_dir=settings.node_share_dir
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
        for name, array in snapshot.items():
            yield name, to_torch(array)

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

    def close(self) -> None:
        """Stop the rollout side's background threads (verl never calls this; tests do)."""
        if self.rollout is not None:
            self.rollout.close()
