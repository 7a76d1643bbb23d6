"""The demo's learner: admit trajectories through the staleness filter, train, publish.

Trajectories arrive from the workers on a multiprocessing queue. A feeder
thread offers each one to a :class:`~wanrl_s3.StalenessFilter` wrapped around
a small bounded queue (drop at ``put`` if already too old), and the training
loop takes them through the same filter (drop at ``get`` if the learner moved
on while they waited). The learner is at version ``v_t`` = the number of
optimiser steps it has taken; versions are published every ``kappa`` steps and
named by that step, so a trajectory's age is in steps and the budget is
``S = kappa + 1``.

Every group that is trained on is checked against the budget once more, here,
independently of the filter: the demo fails if any is older than ``S``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from rl_demo_policy import Policy, advantages, bf16_state, pg_loss

from wanrl_s3 import StalenessFilter


class DemoError(RuntimeError):
    """The demo cannot go on; main() prints the message as one line and exits 1."""


@dataclass(frozen=True)
class LearnerConfig:
    steps: int
    kappa: int
    groups_per_step: int
    group: int
    lr: float
    get_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.steps < self.kappa or self.steps % self.kappa:
            raise ValueError(f"steps ({self.steps}) must be a multiple of kappa ({self.kappa})")

    @property
    def batch(self) -> int:
        """Trajectories per optimiser step."""
        return self.groups_per_step * self.group


@dataclass(frozen=True)
class StepRecord:
    step: int
    reward: float  # mean reward of the trajectories this step trained on
    ages: dict[int, int]  # age in steps -> groups trained on at that age
    wait_s: float  # waiting for admitted trajectories (the learner's bubble)
    train_s: float  # forward, backward, optimiser step
    at_s: float  # wall clock when the step ended

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Intake:
    """Feeds the workers' queue into the filter on a thread, until stopped."""

    def __init__(self, source: Any, filt: StalenessFilter[dict[str, Any]]) -> None:
        self.source = source
        self.filter = filt
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="intake", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self.source.get(timeout=0.1)
            except queue.Empty:
                continue
            while not self._stop.is_set():
                try:
                    self.filter.put(item, timeout=0.1)  # blocks while the learner is busy
                    break
                except queue.Full:
                    continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclass
class EventLog:
    """What the workers report: installs (with digests) and a final summary each."""

    installs: list[dict[str, Any]] = field(default_factory=list)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready: set[str] = field(default_factory=set)
    _cv: threading.Condition = field(default_factory=threading.Condition)

    def follow(self, source: Any, stop: threading.Event) -> threading.Thread:
        def loop() -> None:
            while not stop.is_set():
                try:
                    event = source.get(timeout=0.1)
                except queue.Empty:
                    continue
                with self._cv:
                    kind = event.pop("event")
                    if kind == "install":
                        self.installs.append(event)
                    elif kind == "summary":
                        self.summaries[event["worker"]] = event
                    else:
                        self.ready.add(event["worker"])
                    self._cv.notify_all()

        thread = threading.Thread(target=loop, name="events", daemon=True)
        thread.start()
        return thread

    def wait(self, predicate: Callable[[EventLog], bool], timeout_s: float) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: predicate(self), timeout_s)

    def holding(self, run: str) -> dict[str, int]:
        """Each worker's newest installed version of ``run``."""
        out: dict[str, int] = {}
        for e in self.installs:
            if e["run"] == run:
                out[e["worker"]] = max(out.get(e["worker"], -1), e["version"])
        return out


def train(
    model: Policy,
    cfg: LearnerConfig,
    filt: StalenessFilter[dict[str, Any]],
    publish: Callable[[int, dict[str, torch.Tensor]], None],
    deadline_s: float,
    on_step: Callable[[StepRecord], None] = lambda _: None,
) -> list[StepRecord]:
    """Train ``cfg.steps`` steps (or until ``deadline_s``, rounded down to whole kappa)."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    records: list[StepRecord] = []
    for step in range(1, cfg.steps + 1):
        t0 = time.perf_counter()
        try:
            groups = [filt.get(timeout=cfg.get_timeout_s) for _ in range(cfg.groups_per_step)]
        except queue.Empty:
            raise DemoError(
                f"step {step}: no admitted trajectory for {cfg.get_timeout_s:g} s; the workers "
                "stopped generating, or generate only under versions older than the budget"
            ) from None
        learner_version = filt.learner_version
        t1 = time.perf_counter()
        rewards = torch.from_numpy(np.concatenate([g["rewards"] for g in groups]))
        loss = pg_loss(
            model,
            torch.from_numpy(np.concatenate([g["prompts"] for g in groups])).long(),
            torch.from_numpy(np.concatenate([g["completions"] for g in groups])).long(),
            advantages(rewards, cfg.group),
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        ages = Counter(learner_version - g["version"] for g in groups)
        records.append(
            StepRecord(step, float(rewards.mean()), dict(ages), t1 - t0, t2 - t1, time.time())
        )
        filt.advance(step)
        on_step(records[-1])
        if step % cfg.kappa == 0:
            publish(step, bf16_state(model))
            if time.time() > deadline_s:
                break
    return records
