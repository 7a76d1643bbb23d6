"""A v1 replay-buffer sampler that admits only trajectories inside the staleness budget.

Plug it in with::

    trainer.v1.sampler.custom_sampler.path=pkg://wanrl_s3_verl.sampler
    trainer.v1.sampler.custom_sampler.name=StalenessReplayBuffer
    +trainer.v1.sampler.sampler_kwargs.staleness=4
    +trainer.v1.sampler.sampler_kwargs.store_url=s3://bucket/run   # the engine's store

It is verl's ``ReplayBufferAsync`` with one more eviction rule, the published one
(:mod:`wanrl_s3.staleness`): during step ``g`` the learner holds version ``g - 1``,
and a prompt group is admitted only if its oldest trajectory's version ``v``
satisfies ``v >= (g - 1) - S``. A trajectory's version is its verl tag
``min_global_steps`` mapped through the rollout workers' status objects to the
version they had really installed (:class:`wanrl_s3.VersionMap`);
without ``store_url`` the tag is taken at face value. verl's own rule
(``max_off_policy_threshold``, counted from the prompt's dataloader step) still
applies on top when it is set; ``null`` leaves the decision to this one.

Counting: each prompt group is decided once, when verl evicts it (dropped) or
selects it into a batch (admitted); the age is that of its oldest trajectory.
The counters go into the metrics ``sample()`` returns, once per training step,
on the step's last ``sample()`` call (verl calls it ``parameter_sync_step``
times per step and averages metrics it cannot classify, so per-call cumulative
counters would come out wrong).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

from wanrl_s3 import StalenessFilter, is_admissible
from wanrl_s3.errors import UsageError

from .config import FilterSettings, true_version

log = logging.getLogger(__name__)
VAL = "val"


def group_of(key: str) -> str:
    """verl's prompt uid of a trajectory key ``{uid}_{session}_{index}`` (replay_buffer.py)."""
    return key.split("_")[0]


class StalenessReplayBuffer(ReplayBufferAsync):
    """``ReplayBufferAsync`` plus the ``v >= v_t - S`` rule on the true policy version."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """verl's arguments, unchanged (trainer_mode, trainer_config, ..., sampler_kwargs)."""
        super().__init__(*args, **kwargs)
        if self.trainer_mode == "sync":
            raise UsageError(
                "trainer.v1.sampler.custom_sampler=StalenessReplayBuffer needs an async trainer "
                "(trainer.v1.trainer_mode=separate_async or colocate_async): the sync trainer "
                "is on-policy and has no staleness to filter"
            )
        self.settings = FilterSettings.from_mapping(self.sampler_kwargs)
        self.filter: StalenessFilter[str] = self.settings.staleness_filter("sampler")
        self.versions = self.settings.version_map()
        trainer_config: Any = self.trainer_config or {}
        self.calls_per_step = max(1, int(trainer_config.get("parameter_sync_step", 1) or 1))
        self._verdicts: dict[str, int] = {}  # uid -> true version, from the latest pass
        self._ours: set[str] = set()  # uids stale by our rule in the latest pass
        self._step: int | None = None
        self._calls = 0
        self._warned_untagged = False

    # -- versions -------------------------------------------------------------------------
    def true_version(self, global_steps: int) -> int:
        return true_version(self.versions, global_steps)

    def _group_versions(self, partition_id: str) -> dict[str, int]:
        """uid -> the true version of its oldest trajectory, for every finished group."""
        finished = self.finished_keys[partition_id]
        tags: dict[str, list[int]] = {}
        untagged = 0
        for key, tag in self.partitions[partition_id].items():
            uid = group_of(key)
            if uid in finished:
                step = tag.get("min_global_steps")
                if step is None:
                    untagged += 1
                tags.setdefault(uid, []).append(0 if step is None else int(step))
        if untagged and not self._warned_untagged:
            self._warned_untagged = True
            log.warning(
                "%d trajectories carry no min_global_steps tag; counting them as "
                "version 0 (the oldest), so they are dropped once past the budget",
                untagged,
            )
        return {uid: min(self.true_version(step) for step in steps) for uid, steps in tags.items()}

    # -- verl's hooks ---------------------------------------------------------------------
    def _stale_terminal_keys(self, global_steps: int, partition_id: str) -> set[str]:
        """verl's stale groups, plus those outside the budget on their true version."""
        stale = super()._stale_terminal_keys(global_steps, partition_id)
        if partition_id == VAL:
            return stale
        learner = self._learner_at(global_steps)
        self._verdicts = self._group_versions(partition_id)
        self._ours = {
            uid
            for uid, version in self._verdicts.items()
            if not is_admissible(version, learner, self.filter.staleness)
        }
        return stale | self._ours

    def _evict_terminal_groups(
        self,
        global_steps: int,
        partition_id: str,
        eviction_reasons: tuple[set[str], set[str], set[str], Counter],
    ) -> tuple[set[str], int, int, dict]:
        """Count our drops once, as verl evicts them (right after the pass that found them)."""
        if partition_id != VAL:
            for uid in eviction_reasons[0] & self._ours:
                self.filter.offer(uid, version=self._verdicts[uid])
            self._ours = set()
        return super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)

    def sample(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[KVBatchMeta, dict]:
        """verl's sample; the selected groups count as admitted; counters once per step."""
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if partition_id == VAL:
            return batch, metrics
        for uid in dict.fromkeys(group_of(key) for key in batch.keys):
            version = self._verdicts.get(uid)
            if version is not None:
                self.filter.offer(uid, version=version)
        if self._step_complete(global_steps):
            metrics = {**metrics, **self.filter.snapshot(reset=True)}
        return batch, metrics

    # -- bookkeeping -----------------------------------------------------------------------
    def _learner_at(self, global_steps: int) -> int:
        """During step ``g`` the learner holds version ``g - 1`` (verl's own staleness metric)."""
        learner = max(global_steps - 1, 0)
        if learner > self.filter.learner_version:
            self.filter.advance(learner)
        return self.filter.learner_version

    def _step_complete(self, global_steps: int) -> bool:
        """True on the step's last ``sample()`` call (``parameter_sync_step`` calls per step)."""
        if global_steps != self._step:
            self._step, self._calls = global_steps, 0
        self._calls += 1
        return self._calls >= self.calls_per_step
