"""The trainer ranks' side of the ``wanrl_s3`` checkpoint engine.

The master rank publishes verl's weights as version ``global_steps``; every rank
runs verl's generator to its end (for FSDP each tensor is an all-gather that all
ranks join in lockstep), whatever happens.

With ``background`` (the default) the master's sync only copies the weights into
host buffers (:mod:`.host_copy`) and returns; the publication runs on a background
thread (:mod:`.background`) while training goes on. The next publishing sync waits
for it if it is still running (``wanrl_s3/publish_wait_s``), reports its figures,
or raises its error. Without it, the sync publishes before it returns, as before.
Either way, what is fatal is the same: the first publication's store error (a
wrong bucket or credentials) and anything that is not a store error; a store error
once the store was reached is an outage, logged and reported as ``wanrl_s3/failed``.

With ``publish_ranks: all`` every rank publishes: each copies and uploads its share
of the version through :class:`wanrl_s3.ShardedPublisher` (:mod:`.share` picks it,
:mod:`.ranks` gives the launch's run id), in the background like the master alone
does otherwise, under the same error policy on every rank; the master (rank 0)
commits, signs and reports the version's figures, the other ranks report their
own under ``wanrl_s3/rank<r>/`` (verl merges the ranks' metrics into one dict).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator, Mapping
from functools import partial
from typing import Any

import torch

from wanrl_s3 import (
    PublishConfig,
    Publisher,
    PublishResult,
    ShardedPublisher,
    Signer,
    resume,
)
from wanrl_s3.errors import StoreError, UsageError, VersionConflictError

from .background import BackgroundPublications, Outcome
from .clock import ClockTicker
from .config import EngineSettings
from .host_copy import HostBuffers, cast_floating
from .ranks import RankGroup
from .share import BalancedShare

log = logging.getLogger(__name__)
METRIC_PREFIX = "wanrl_s3/"
Weights = Generator[tuple[str, torch.Tensor], None, None]
Tensors = Iterator[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor]


def drain(weights: Iterator[Any]) -> None:
    """Run verl's generator to its end: each step may be a collective every rank must join."""
    for _ in weights:
        pass


class TrainerSide:
    """Publishes from the master rank, or from every rank; verl's generator runs in lockstep.

    ``group`` (``publish_ranks: all``): this rank, the number of ranks and the launch's
    run id. Left None it is found at the first sync (rank and size from the process
    group, the run id broadcast from rank 0); tests and launchers without a process
    group set it before the first sync.
    """

    def __init__(
        self, settings: EngineSettings, is_master: bool, group: RankGroup | None = None
    ) -> None:
        self.settings = settings
        self.is_master = is_master
        self.group = group
        self.sharded = settings.publish_ranks == "all"
        self.syncs = 0
        self.reached_store = False  # a publication went through (or found the version there)
        self.publisher: Publisher | ShardedPublisher | None = None
        self.buffers: HostBuffers | None = None
        self.background: BackgroundPublications | None = None
        self.clock = ClockTicker()
        if not (is_master or self.sharded):
            return
        self.stores = settings.publish_stores()
        signs = is_master and settings.signing_key  # the committing rank: the master
        self.signer = Signer.from_file(settings.signing_key) if signs else None
        self.config = PublishConfig(
            delta=settings.delta,
            keyframe_every=settings.keyframe_every,
            concurrency=settings.concurrency,
        )
        if not self.sharded:
            self.publisher = Publisher(self.stores, self.config, signer=self.signer, keep_base=True)
        if settings.background:
            self.buffers = HostBuffers(settings.dtype)
            self.background = BackgroundPublications(settings.close_wait_s)

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
        if self.sharded and self.publisher is None:
            self.publisher = self._join()
        if self.publisher is None:
            return {}
        version = global_steps if global_steps is not None else self.syncs - 1
        job = partial(
            self._publish,
            self.publisher,
            version=version,
            steps=global_steps,
            first=self.syncs == 1,
        )
        share = self._share()
        if self.background is not None and self.buffers is not None:
            metrics = self._send_background(
                weights, publish, version, job, self.background, self.buffers, share
            )
            if self.sharded and publish:
                metrics[METRIC_PREFIX + "share_bytes"] = float(self.buffers.nbytes)
        elif not publish:
            metrics = {METRIC_PREFIX + "published": 0.0}
        else:
            metrics = job(cast_floating(weights, self.settings.dtype, share))
        return self._labelled(metrics)

    def _join(self) -> ShardedPublisher:
        """This rank's part in publishing from every rank (at the first sync: a collective)."""
        if self.group is None:
            self.group = RankGroup.discover(self.is_master)
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

    def _share(self) -> BalancedShare | None:
        """This sync's balanced share, or None when this rank publishes what it is given."""
        if not self.sharded or self.group is None or self.settings.assign != "balanced":
            return None
        return BalancedShare(self.group.rank, self.group.ranks)

    def _labelled(self, metrics: dict[str, float]) -> dict[str, float]:
        """A non-committing rank's figures under ``wanrl_s3/rank<r>/`` (verl merges the ranks')."""
        if not self.sharded or self.group is None or self.group.rank == 0:
            return metrics
        label = f"{METRIC_PREFIX}rank{self.group.rank}/"
        return {label + key.removeprefix(METRIC_PREFIX): value for key, value in metrics.items()}

    @staticmethod
    def _send_background(
        weights: Weights,
        publish: bool,
        version: int,
        job: partial[Outcome],
        background: BackgroundPublications,
        buffers: HostBuffers,
        share: BalancedShare | None,
    ) -> dict[str, float]:
        """Collect the previous publication (waiting only to publish again), copy, hand off."""
        start = time.monotonic()
        if publish:
            background.wait()
        wait_s = time.monotonic() - start
        metrics = background.collect() or {}  # raises the previous one's failure
        if not publish:
            return {**metrics, METRIC_PREFIX + "queued": 0.0}
        start = time.monotonic()
        tensors = buffers.fill(weights, share)
        copy_s = time.monotonic() - start
        background.start(version, partial(job, tensors))
        return {
            **metrics,
            METRIC_PREFIX + "queued": 1.0,
            METRIC_PREFIX + "queued_version": float(version),
            METRIC_PREFIX + "publish_wait_s": wait_s,
            METRIC_PREFIX + "publish_copy_s": copy_s,
        }

    def _publish(
        self,
        publisher: Publisher | ShardedPublisher,
        tensors: Tensors,
        *,
        version: int,
        steps: int | None,
        first: bool,
    ) -> Outcome:
        """One publication (or this rank's share of it) and its figures; raises only what
        must stop the run."""
        start = time.monotonic()
        try:
            if first:
                self._resume(publisher)
            result = publisher.publish(tensors, version, metadata={"verl_global_steps": str(steps)})
        except VersionConflictError as exc:
            self.reached_store = True
            log.warning(
                "wanrl_s3: not publishing step %s: %s (a resumed run: the store "
                "already holds this version or a newer one)",
                steps,
                exc,
            )
            return {METRIC_PREFIX + "published": 0.0}
        except StoreError as exc:
            if not self.reached_store:  # a bad URL or credentials: fail at once, loudly
                raise StoreError(
                    f"wanrl_s3: the first publication to {self.settings.where} failed: {exc}"
                ) from exc
            log.error(  # an outage mid-run: ride it out, the staleness filter bounds the cost
                "wanrl_s3: publication of step %s failed, rollout keeps its current "
                "weights until the next one: %s",
                steps,
                exc,
            )
            return {METRIC_PREFIX + "published": 0.0, METRIC_PREFIX + "failed": 1.0}
        self.reached_store = True
        if result is None:  # not the committing rank: its share is in the committed version
            return {
                METRIC_PREFIX + "published": 1.0,
                METRIC_PREFIX + "publish_s": time.monotonic() - start,
            }
        return publish_metrics(result)

    def _resume(self, publisher: Publisher | ShardedPublisher) -> None:
        """A restarted trainer continues from the store's newest version: deltas, not a keyframe.

        The versions the store already holds past this process's step were published
        by the run before the restart; their numbers are verl steps (the staleness
        filters' clock), so this process skips them and publishes from the next step
        on, as a delta against the newest of them. Ranks publishing shares do not resume
        (the core has no resume across ranks yet): their first version is a keyframe.
        """
        if self.settings.delta == "never":
            return
        if isinstance(publisher, ShardedPublisher):
            log.info(
                "wanrl_s3: rank %d publishes shares, which do not resume: the first version "
                "of this launch is a keyframe",
                publisher.rank,
            )
            return
        point = resume(publisher)
        if point is not None:
            self.reached_store = True
            log.info(
                "wanrl_s3: resuming from v%d in %s: the next publication is a delta against it",
                point.version,
                self.settings.where,
            )

    def wait_published(self, timeout_s: float | None = None) -> dict[str, float] | None:
        """Wait for the background publication; its figures (the next sync reports them too).

        None while it is still running at ``timeout_s``, {} when there is none;
        raises :class:`~.background.PublicationFailedError` if it failed.
        """
        if self.background is None:
            return {}
        if not self.background.wait(timeout_s):
            return None
        return self._labelled(self.background.peek() or {})

    def close(self) -> bool:
        """Let a publication in flight finish (``close_wait_s`` at most); True if none is left."""
        return True if self.background is None else self.background.close()


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
