"""verl checkpoint-engine backend ``wanrl_s3``: weight sync through an S3-compatible bucket.

Importing this module registers the backend, which is exactly what verl's
``custom_backend_module`` hook does in every process that builds an engine::

    actor_rollout_ref.rollout.checkpoint_engine.backend=wanrl_s3
    actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=wanrl_s3_verl.backend
    +actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.wanrl_s3.store_url=s3://b/run

verl builds the engine on two kinds of process (notes/verl-0.9.1.md, section 3):

* trainer ranks pass ``is_master``: the master publishes each sync's weights (cast to
  bf16, an XOR delta against its last publication, keyframes as configured) as
  version ``global_steps`` through the trainer core (:class:`wanrl_s3.TrainerPublisher`:
  by default the sync returns once they are copied to host memory, and the
  publication runs in the background); the other ranks drain verl's generator, whose
  FSDP all-gathers need every rank in lockstep (:class:`TrainerSide`);
* rollout ranks (``CheckpointEngineWorker``) pass no ``is_master``: a background
  :class:`~wanrl_s3.watch.Watcher` keeps the newest verified version in host memory,
  and ``receive_weights`` hands over whatever is ready without waiting for a
  download (invariant 7), recording what it installed at which step for the
  staleness filters (:class:`wanrl_s3.StepStatusWriter`).

No process group is needed: the bucket is the rendezvous.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Generator, Iterator
from concurrent.futures import Future
from typing import Any

import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

from wanrl_s3 import (
    InstallResult,
    Publication,
    PublicationObserver,
    PublishConfig,
    Publisher,
    PublishResult,
    RankGroup,
    ShardedPublisher,
    Signer,
    Snapshot,
    StepStatusWriter,
    Subscriber,
    TrainerMetrics,
    TrainerPublisher,
    Verifier,
    VersionPublisher,
    WatchConfig,
    Watcher,
    return_big_buffers,
    to_torch,
)
from wanrl_s3.errors import UsageError

from .clock import ClockTicker
from .config import EngineSettings

log = logging.getLogger(__name__)
BACKEND = "wanrl_s3"
METRIC_PREFIX = "wanrl_s3/"
Weights = Generator[tuple[str, torch.Tensor], None, None]


def drain(weights: Iterator[Any]) -> None:
    """Run verl's generator to its end: each step may be a collective every rank must join."""
    for _ in weights:
        pass


class TrainerSide:
    """The trainer ranks' side: verl's syncs, settings and metrics over the trainer core.

    The master publishes each version through :class:`wanrl_s3.TrainerPublisher`
    (``publish_ranks: all``: every rank publishes its share through a
    :class:`wanrl_s3.ShardedPublisher`, and the master commits); what stops the run
    is the core's policy. Every rank runs verl's generator to its end, whatever
    happens. ``group`` (``publish_ranks: all``): this rank, the rank count and the
    launch's run id; left None it is found at the first sync (from the process
    group, the run id broadcast from rank 0); tests set it before the first sync.
    """

    def __init__(
        self, settings: EngineSettings, is_master: bool, group: RankGroup | None = None
    ) -> None:
        self.settings = settings
        self.is_master = is_master
        self.group = group
        self.sharded = settings.publish_ranks == "all"
        self.syncs = 0
        self.core: TrainerPublisher | None = None
        self.pending: Future[Publication] | None = None  # reported at the next sync
        self.clock = ClockTicker()
        # metrics_port: the master serves TrainerMetrics (rollout engines ignore the key)
        self.observer = PublicationObserver()
        self.metrics_server = None
        if is_master and settings.metrics_port is not None:
            self.observer = TrainerMetrics.of()
            self.metrics_server = settings.serve_metrics()
        if not (is_master or self.sharded):
            return
        self.stores = settings.publish_stores()
        key = settings.signing_key if is_master else None  # the committing rank: the master
        self.signer = Signer.from_file(key) if key else None
        # the rollout workers' keyring: the master adopts only a base they trust
        trusted = settings.verify_key if is_master else None
        self.verifier = Verifier.from_file(trusted) if trusted else None
        self.config = PublishConfig(
            delta=settings.delta,
            keyframe_every=settings.keyframe_every,
            concurrency=settings.concurrency,
            payload_prefixes=settings.payload_prefixes,
        )
        if not self.sharded:
            self.core = self._core(Publisher(self.stores, self.config, signer=self.signer))

    def _core(self, publisher: VersionPublisher) -> TrainerPublisher:
        return TrainerPublisher(
            publisher,
            dtype=self.settings.dtype,
            background=self.settings.background,
            verifier=self.verifier,
            allow_unsigned=self.settings.allow_unsigned,
            close_wait_s=self.settings.close_wait_s,
            observer=self.observer,
        )

    def publishes_at(self, global_steps: int | None) -> bool:
        """The first sync of this process, then every ``publish_every`` steps (kappa)."""
        if self.syncs == 0:
            return True
        step = self.syncs if global_steps is None else global_steps
        return step % self.settings.publish_every == 0

    def send(self, weights: Weights, global_steps: int | None) -> dict[str, float]:
        try:
            metrics = self._send(weights, global_steps)
        finally:
            drain(weights)  # after an error too: the other ranks are waiting in lockstep
        if self.is_master and global_steps is not None:
            self.clock.tick(global_steps)  # the learner now holds this version
        return metrics

    def _send(self, weights: Weights, global_steps: int | None) -> dict[str, float]:
        publish = self.publishes_at(global_steps)
        self.syncs += 1
        if self.sharded and self.core is None:
            self.core = self._core(self._join())
        core = self.core
        if core is None:
            return {}
        version = global_steps if global_steps is not None else self.syncs - 1
        metadata = {"verl_global_steps": str(global_steps)}
        if not self.settings.background:
            if not publish:
                return self._labelled({METRIC_PREFIX + "published": 0.0})
            done = core.submit(weights, version, metadata=metadata).result()
            return self._labelled(publication_metrics(done))
        start = time.monotonic()
        if publish:
            core.wait()
        wait_s = time.monotonic() - start
        metrics = self._collect()  # raises the previous one's failure
        if not publish:
            return self._labelled({**metrics, METRIC_PREFIX + "queued": 0.0})
        start = time.monotonic()
        self.pending = core.submit(weights, version, metadata=metadata)
        metrics.update(
            {
                METRIC_PREFIX + "queued": 1.0,
                METRIC_PREFIX + "queued_version": float(version),
                METRIC_PREFIX + "publish_wait_s": wait_s,
                METRIC_PREFIX + "publish_copy_s": time.monotonic() - start,
            }
        )
        if self.sharded:
            metrics[METRIC_PREFIX + "share_bytes"] = float(core.host_bytes)
        return self._labelled(metrics)

    def _join(self) -> ShardedPublisher:
        """This rank's part in publishing from every rank (at the first sync: a collective)."""
        if self.group is None:
            self.group = RankGroup.discover(prefix="verl", require_group=not self.is_master)
        group = self.group
        if (group.rank == 0) != self.is_master:
            raise UsageError(
                "publish_ranks: all: the master commits and signs, so it must be rank 0 "
                f"(verl's rule); this rank is {group.rank} with is_master={self.is_master}"
            )
        log.info(
            "wanrl_s3: rank %d of %d publishes its share (assign=%s, run %s)",
            group.rank,
            group.ranks,
            self.settings.assign,
            group.run_id,
        )
        return ShardedPublisher(
            self.stores,
            self.config,
            rank=group.rank,
            ranks=group.ranks,
            run_id=group.run_id,
            assign=self.settings.assign,
            signer=self.signer,
            timeout_s=self.settings.share_timeout_s,
        )

    def _collect(self) -> dict[str, float]:
        """The finished background publication's figures, once; raises its failure."""
        pending = self.pending
        if pending is None or not pending.done():
            return {}
        self.pending = None
        return background_metrics(pending.result())

    def _labelled(self, metrics: dict[str, float]) -> dict[str, float]:
        """A non-committing rank's figures under ``wanrl_s3/rank<r>/`` (verl merges the ranks')."""
        if not self.sharded or self.group is None or self.group.rank == 0:
            return metrics
        label = f"{METRIC_PREFIX}rank{self.group.rank}/"
        return {label + key.removeprefix(METRIC_PREFIX): value for key, value in metrics.items()}

    def wait_published(self, timeout_s: float | None = None) -> dict[str, float] | None:
        """Wait for the background publication; its figures (the next sync reports them too).

        None while it is still running at ``timeout_s``, {} when there is none;
        raises :class:`wanrl_s3.errors.PublicationFailedError` if it failed.
        """
        if self.core is None or not self.settings.background:
            return {}
        if not self.core.wait(timeout_s):
            return None
        pending = self.pending
        return {} if pending is None else self._labelled(background_metrics(pending.result()))

    def close(self) -> bool:
        """Let a publication in flight finish (``close_wait_s`` at most); True if none is left."""
        return True if self.core is None else self.core.close()


def publication_metrics(done: Publication) -> dict[str, float]:
    """How a publication ended, as verl's metrics: numbers only (its loggers reduce them)."""
    if done.result is not None:
        return publish_metrics(done.result)
    if done.skipped is not None:
        return {METRIC_PREFIX + "published": 0.0}
    if done.failed is not None:
        return {METRIC_PREFIX + "published": 0.0, METRIC_PREFIX + "failed": 1.0}
    # not the committing rank: its share is in the committed version
    return {METRIC_PREFIX + "published": 1.0, METRIC_PREFIX + "publish_s": done.seconds}


def background_metrics(done: Publication) -> dict[str, float]:
    """A background publication's figures, reported at a later sync: with its version."""
    return {METRIC_PREFIX + "version": float(done.version), **publication_metrics(done)}


def publish_metrics(result: PublishResult) -> dict[str, float]:
    """The committed version's figures."""
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
            host_cache_dir=settings.host_cache_dir,
            reuse_installed=settings.host_cache_dir is None,
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
        # a staged version (host_cache_dir) maps files: once the engine has copied a
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
        ``background`` is off); raises :class:`wanrl_s3.errors.PublicationFailedError`
        if it failed.
        """
        if self.trainer is None:
            raise UsageError("wait_published is a trainer engine's method")
        return self.trainer.wait_published(timeout_s)

    def close(self) -> None:
        """Stop the background threads (verl never calls this; tests and exit hooks do).

        A trainer's publication in flight is given ``close_wait_s`` to finish; at
        interpreter exit that happens without a call (the trainer core's exit hook).
        """
        if self.rollout is not None:
            self.rollout.close()
        if self.trainer is not None:
            self.trainer.close()
