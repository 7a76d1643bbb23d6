"""The demo's rollout worker: one process that samples from the policy it installed.

Each worker reads from its own region's bucket only. Two :class:`~wanrl_s3.Watcher`
threads keep it current (the small policy it samples from, and the large model
whose deltas are the point of the second run); they download, verify and decode
the next version in the background while this process keeps sampling, and the
install between two batches is the only pause. Every group of completions is
tagged with the policy version it was sampled under and goes back to the learner
on a multiprocessing queue; policies travel only through the buckets.

After each install the worker writes its status object (exactly what
``wanrl-s3 worker`` writes, so ``wanrl-s3 status`` reads it) and tells the demo
what it installed together with a BLAKE3 digest of the bits it now holds: the
learner compares that digest with the bits it published, an end-to-end check
that does not trust the library's own verification. A probe thread times a HEAD
to the worker's bucket now and then, and the summary it sends at the end
carries those times and where its wall clock went, for the planner beside the
run (rl_demo_planner).
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from rl_demo_policy import Policy, TaskConfig, bf16_state, bits, load_bf16, prompts, reward, sample
from rl_demo_publish import digest

from wanrl_s3 import StatusReporter, Subscriber, WatchConfig, Watcher, open_store

RUNS = ("policy", "large")


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs; plain values, so it crosses a spawn."""

    worker_id: str
    region: str
    endpoint_url: str
    urls: Mapping[str, str]  # run -> this region's store URL
    task: TaskConfig
    groups_per_batch: int
    group: int
    poll_interval_s: Mapping[str, float]  # run -> seconds between polls of LATEST
    seed: int
    probe_interval_s: float = 0.5  # between the timed HEADs of RequestProbe


class RequestProbe:
    """Times one HEAD of LATEST at a jittered interval, on its own thread, for the planner.

    The fleet model charges each request its round trip to the bucket (the
    link's delay plus the store's answer time). Timed from a thread beside the
    sampling loop, as the watchers' own requests run, it includes the waits
    they see for the server and for this process's interpreter.
    """

    def __init__(self, store: Any, interval_s: float, seed: int) -> None:
        self.store = store
        self.interval_s = interval_s
        self.samples_s: list[float] = []
        self.error: str | None = None
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="request-probe", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s * self._rng.uniform(0.5, 1.5)):
            t0 = time.perf_counter()
            try:
                self.store.head("LATEST")
            except Exception as exc:  # seen in the summary; the demo goes on without it
                self.error = f"{type(exc).__name__}: {exc}"
                continue
            self.samples_s.append(time.perf_counter() - t0)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(5)
        return list(self.samples_s)


class _Run:
    """One watched run: its watcher, its status object, and how an install lands."""

    def __init__(self, spec: WorkerSpec, run: str, subscriber: Subscriber) -> None:
        config = WatchConfig(poll_interval_s=spec.poll_interval_s[run], jitter_fraction=0.2)
        self.name = run
        self.watcher = Watcher(subscriber, config)
        self.reporter = StatusReporter(subscriber.store, spec.worker_id, spec.region)

    def install(
        self,
        apply: Callable[[str, np.ndarray], None],
        held_bits: Callable[[], Mapping[str, np.ndarray]],
        events: Any,
        spec: WorkerSpec,
    ) -> None:
        """Install the newest ready version, if any; report it to the bucket and the demo."""
        result = self.watcher.install(apply)
        if result is None:
            return
        self.reporter.installed(result)
        events.put(
            {
                "event": "install",
                "run": self.name,
                "worker": spec.worker_id,
                "region": spec.region,
                "digest": digest(held_bits()),
                **result.to_dict(),
            }
        )


def run_worker(spec: WorkerSpec, trajectories: Any, events: Any, stop: Any) -> None:
    """The worker process: install what is ready, sample a batch, send it, repeat."""
    torch.set_num_threads(1)
    torch.manual_seed(spec.seed)
    gen = torch.Generator().manual_seed(spec.seed)
    model = Policy(spec.task).eval()
    large: dict[str, np.ndarray] = {}
    subs = {
        run: Subscriber(open_store(spec.urls[run], endpoint_url=spec.endpoint_url), concurrency=4)
        for run in RUNS
    }
    runs = {run: _Run(spec, run, sub) for run, sub in subs.items()}
    for r in runs.values():
        r.watcher.start()
    probe = RequestProbe(subs["policy"].store, spec.probe_interval_s, spec.seed)
    events.put({"event": "ready", "worker": spec.worker_id})
    stats = {
        "groups": 0,
        "sample_s": 0.0,
        "blocked_s": 0.0,  # waiting for room on the full queue
        "unserved_s": 0.0,  # holding no policy yet: nothing to sample from
        "started_s": time.time(),
    }
    try:
        while not stop.is_set():
            _install_all(runs, model, large, events, spec)
            version = runs["policy"].watcher.installed_version
            if version is None:
                t0 = time.perf_counter()
                runs["policy"].watcher.wait_ready(timeout_s=0.2)
                stats["unserved_s"] += time.perf_counter() - t0
                continue
            t0 = time.perf_counter()
            batch = _generate(model, spec, version, gen)
            stats["sample_s"] += time.perf_counter() - t0
            for item in batch:  # while the queue is full, installs still happen
                stats["blocked_s"] += _send(
                    item, trajectories, stop, lambda: _install_all(runs, model, large, events, spec)
                )
            stats["groups"] += len(batch)
    finally:
        for r in runs.values():
            r.watcher.stop()
        request_s = probe.stop()
        events.put(
            {
                "event": "summary",
                "worker": spec.worker_id,
                "region": spec.region,
                "stopped_s": time.time(),
                "errors": {name: r.watcher.last_error for name, r in runs.items()},
                "request_s": request_s,
                "probe_error": probe.error,
                **stats,
            }
        )
        for sub in subs.values():
            sub.close()
        trajectories.cancel_join_thread()  # groups still buffered at stop are not needed


def _install_all(
    runs: Mapping[str, _Run],
    model: Policy,
    large: dict[str, np.ndarray],
    events: Any,
    spec: WorkerSpec,
) -> None:
    def keep(name: str, arr: np.ndarray) -> None:  # the large model: held, not sampled from
        held = large.get(name)
        if held is None or held.shape != arr.shape:
            large[name] = arr.copy()
        else:
            np.copyto(held, arr)

    runs["policy"].install(
        lambda n, a: load_bf16(model, n, a), lambda: bits(bf16_state(model)), events, spec
    )
    runs["large"].install(
        keep, lambda: {n: a.view(np.uint16) for n, a in large.items()}, events, spec
    )


def _generate(model: Policy, spec: WorkerSpec, version: int, gen: torch.Generator) -> list[dict]:
    """One batch of GRPO groups, every one tagged with the version that sampled it."""
    p = prompts(spec.task, spec.groups_per_batch, spec.group, gen)
    c = sample(model, p, gen)
    r = reward(p, c)
    now = time.time()
    g = spec.group
    return [
        {
            "version": version,
            "worker": spec.worker_id,
            "sampled_at_s": now,
            "prompts": p[i * g : (i + 1) * g].numpy().astype(np.int8),
            "completions": c[i * g : (i + 1) * g].numpy().astype(np.int8),
            "rewards": r[i * g : (i + 1) * g].numpy(),
        }
        for i in range(spec.groups_per_batch)
    ]


def _send(item: dict, trajectories: Any, stop: Any, idle: Callable[[], None]) -> float:
    """Put one group on the (bounded) queue; returns the seconds spent waiting for room.

    The learner is the bottleneck when the queue is full; the worker then still
    installs new versions (``idle``), as an engine's weight sync would.
    """
    t0 = time.perf_counter()
    while not stop.is_set():
        try:
            trajectories.put(item, timeout=0.1)
            break
        except queue.Full:
            idle()
    return time.perf_counter() - t0
