"""The wanrl-s3 demo: asynchronous RL whose policies reach the fleet only through buckets.

    make demo                                    # about 3 minutes on 2 CPU cores
    .venv/bin/python examples/demo.py --help     # sizes, kappa, --delta, --out-dir

1. Starts a local S3 server (SeaweedFS, a real one, on free ports of 127.0.0.1,
   its data in a temporary folder) with one bucket per region (us-east,
   eu-west); the learner publishes to both (fanout mode).
2. Starts four rollout worker processes, two per region. Each watches its own
   region's bucket, installs every verified version between two batches, samples
   completions from the policy it holds while the next version downloads, tags
   each with that version and sends it to the learner on a multiprocessing queue.
3. The learner, a small transformer built here from scratch, learns to reverse
   digits by GRPO-style policy gradient. It admits trajectories through a
   StalenessFilter with S = kappa + 1 and trains only on admitted ones; every
   kappa steps it publishes a version (delta="auto").
4. Alongside, it publishes a second run, a 110 MB LLaMA-shaped model moving 1%
   of its values per version, to the same fleet: the case where deltas pay,
   against the small policy where ``auto`` rightly ships full snapshots.
5. Prints the report (versions, phases, T_bcast at 90% from the workers' status
   objects, admission, reward, the planner's models fed with what the run
   measured beside what it measured, the 8B reference point) and writes it as
   JSON with a PNG beside it.

Exits 1 if any worker installed bits that differ from what the learner
published, if a trajectory older than the budget was trained on, or if no
version reached every worker.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import statistics
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the rl_demo_* helpers

import rl_demo_planner as plan
import rl_demo_report as rep
import torch
from rl_demo_fleet import RUNS, WorkerSpec, run_worker
from rl_demo_learner import DemoError, EventLog, Intake, LearnerConfig, StepRecord, train
from rl_demo_policy import Policy, TaskConfig, bf16_state, param_count
from rl_demo_publish import Channel, LargeModel, RunPublisher

from wanrl_s3 import (
    DELTA_MODES,
    PublishConfig,
    StalenessConfig,
    StalenessFilter,
    WanrlError,
    open_store,
)
from wanrl_s3.testing import CREDENTIALS, llama_like_layout, local_s3, make_bucket

HERE = Path(__file__).resolve().parent
REGIONS = ("us-east", "eu-west")
DEFAULT_OUT = HERE.parent / "out" / "demo"  # out/ is git-ignored


@dataclass(frozen=True)
class DemoConfig:
    """The demo's sizes. The defaults are `make demo`; the test runs a smaller one."""

    steps: int = 80
    kappa: int = 2
    groups_per_step: int = 64
    group: int = 8
    lr: float = 5e-3
    task: TaskConfig = field(default_factory=TaskConfig)
    workers_per_region: int = 2
    worker_groups_per_batch: int = 2
    large_preset: str = "demo-300m"
    large_layers: int = 2
    large_density: float = 0.01
    large_keyframe_every: int = 20
    poll_interval_s: float = 0.25  # the policy's watchers
    large_poll_interval_s: float = 0.5  # the large run's (not sampled from: less urgent)
    delta: str = "auto"
    seed: int = 0
    # On a busy machine, training stops early (at a kappa boundary) once this many seconds
    # have passed since run_demo() began, so that the whole demo stays near 3 minutes.
    max_train_s: float = 140.0
    settle_s: float = 60.0  # after the last step: how long the fleet gets to catch up

    def __post_init__(self) -> None:
        if self.delta not in DELTA_MODES:
            raise ValueError(f"delta must be one of {DELTA_MODES}, got {self.delta!r}")
        if self.workers_per_region < 1 or self.worker_groups_per_batch < 1:
            raise ValueError("workers_per_region and worker_groups_per_batch must be >= 1")
        StalenessConfig.from_kappa(self.kappa)  # kappa >= 2, or it says why not
        LearnerConfig(self.steps, self.kappa, self.groups_per_step, self.group, self.lr)

    @property
    def staleness(self) -> int:
        return self.kappa + 1

    @property
    def workers(self) -> int:
        return self.workers_per_region * len(REGIONS)

    @property
    def queue_groups(self) -> int:
        """Each of the two queues (workers -> learner, and the filter's): a quarter step."""
        return max(1, self.groups_per_step // 4)

    @property
    def queue_rollouts(self) -> int:
        """Trajectories the fleet can bank while the learner trains: both queues, the group
        the intake thread holds, and each worker's batch waiting for room."""
        groups = 2 * self.queue_groups + 1 + self.workers * self.worker_groups_per_batch
        return groups * self.group


def large_layout(preset: str, layers: int) -> list[tuple[str, tuple[int, ...]]]:
    """The first ``layers`` decoder layers of a preset (no embeddings, no head).

    A stand-in for the bulk of an LLM's weights, kept small enough that four
    workers on two cores can decode and verify every version of it.
    """
    keep = {str(i) for i in range(layers)}
    return [
        (name, shape)
        for name, shape in llama_like_layout(preset)
        if name.startswith("model.layers.") and name.split(".")[2] in keep
    ]


@dataclass
class _Fleet:
    """The worker processes and the queues that connect them to the learner."""

    procs: list[Any]
    trajectories: Any
    events_q: Any
    stop: Any
    specs: list[WorkerSpec]

    @classmethod
    def start(cls, cfg: DemoConfig, endpoint: str, urls: dict[str, dict[str, str]]) -> _Fleet:
        ctx = _fork_server()
        # small queues: every group buffered is a group that ages before it is trained on
        trajectories = ctx.Queue(maxsize=cfg.queue_groups)
        events_q, stop = ctx.Queue(), ctx.Event()
        specs = [
            WorkerSpec(
                f"{region}-{i}",
                region,
                endpoint,
                urls[region],
                cfg.task,
                cfg.worker_groups_per_batch,
                cfg.group,
                {"policy": cfg.poll_interval_s, "large": cfg.large_poll_interval_s},
                cfg.seed * 1000 + 10 * r + i + 1,
            )
            for r, region in enumerate(REGIONS)
            for i in range(cfg.workers_per_region)
        ]
        procs = [
            ctx.Process(target=run_worker, args=(s, trajectories, events_q, stop), daemon=True)
            for s in specs
        ]
        for p in procs:
            p.start()
        return cls(procs, trajectories, events_q, stop, specs)

    def shut_down(self, events: EventLog) -> None:
        self.stop.set()
        events.wait(lambda e: len(e.summaries) == len(self.procs), 30)
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()


def _fork_server() -> Any:
    """A fork server that has imported the worker's module (torch included) once.

    Each worker is then forked from it: no threads or sockets inherited from the
    learner, and no four interpreters importing torch at once on two cores.
    Python 3.11's fork server does not take the parent's sys.path, only its
    environment, so the examples folder goes on PYTHONPATH while it starts.
    """
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["rl_demo_fleet"])
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), before) if p)
    try:
        forkserver.ensure_running()
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    return ctx


def _buckets(endpoint: str) -> dict[str, dict[str, str]]:
    """region -> run -> store URL; bucket names are fresh so runs never collide."""
    tag = uuid.uuid4().hex[:6]
    return {
        region: {
            run: f"s3://{make_bucket(endpoint, f'wanrl-demo-{region}-{tag}')}/demo/{run}"
            for run in RUNS
        }
        for region in REGIONS
    }


class Progress:
    """One line per milestone, stamped with the seconds since the demo started."""

    def __init__(self, quiet: bool = False) -> None:
        self.t0 = time.perf_counter()
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[{time.perf_counter() - self.t0:6.1f} s] {message}", flush=True)


def run_demo(cfg: DemoConfig, endpoint: str, say: Progress | None = None) -> dict[str, Any]:
    """Run the whole loop against ``endpoint``; return the report (a JSON-able dict)."""
    say = say or Progress()
    deadline_s = time.time() + cfg.max_train_s
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    urls = _buckets(endpoint)
    stores = {
        run: {region: open_store(urls[region][run], endpoint_url=endpoint) for region in REGIONS}
        for run in RUNS
    }
    fleet = _Fleet.start(cfg, endpoint, urls)
    events, events_stop = EventLog(), threading.Event()
    events.follow(fleet.events_q, events_stop)
    try:
        return _learn(cfg, fleet, events, stores, urls, say, deadline_s)
    finally:
        fleet.shut_down(events)
        events_stop.set()


def _learn(
    cfg: DemoConfig,
    fleet: _Fleet,
    events: EventLog,
    stores: dict[str, dict[str, Any]],
    urls: dict[str, dict[str, str]],
    say: Progress,
    deadline_s: float,
) -> dict[str, Any]:
    model = Policy(cfg.task)
    large = LargeModel(
        large_layout(cfg.large_preset, cfg.large_layers), cfg.large_density, cfg.seed
    )
    pubs = {
        "policy": RunPublisher(
            "policy", list(stores["policy"].values()), PublishConfig(delta=cfg.delta)
        ),
        "large": RunPublisher(
            "large",
            list(stores["large"].values()),
            PublishConfig(delta=cfg.delta, keyframe_every=cfg.large_keyframe_every),
        ),
    }
    if not events.wait(lambda e: len(e.ready) == cfg.workers, 120):
        raise DemoError("the rollout workers did not start within 120 s")
    say(f"{cfg.workers} workers watching their region's bucket; publishing version 0")
    started_at = time.time()
    for run, state in (("policy", bf16_state(model)), ("large", large.version(0))):
        r = pubs[run].publish(0, state)
        say(
            f"{run} v0: {r.kind}, {r.stored_bytes / 1e6:.2f} MB to both regions "
            f"in {r.total_s:.1f} s"
        )
    channels = {
        "policy": Channel(pubs["policy"], latest_only=True),
        "large": Channel(pubs["large"], latest_only=True),
    }
    filt: StalenessFilter[dict[str, Any]] = StalenessFilter(
        StalenessConfig.from_kappa(cfg.kappa), queue.Queue(maxsize=cfg.queue_groups)
    )
    intake = Intake(fleet.trajectories, filt)

    def publish(version: int, state: dict[str, torch.Tensor]) -> None:
        channels["policy"].submit(version, state)
        channels["large"].submit(version, large.version)

    def on_step(s: StepRecord) -> None:
        if s.step % 10 == 0 or s.step == 1:
            snap = filt.snapshot()
            held = events.holding("policy")
            say(
                f"step {s.step:>3}: reward {s.reward:.2f}; admitted "
                f"{int(snap['staleness/admitted']) * cfg.group:,}, dropped as too old "
                f"{int(snap['staleness/dropped']) * cfg.group:,}; workers hold policy "
                + " ".join(f"v{held[w]}" for w in sorted(held))
            )

    lcfg = LearnerConfig(cfg.steps, cfg.kappa, cfg.groups_per_step, cfg.group, cfg.lr)
    try:
        steps = train(model, lcfg, filt, publish, deadline_s, on_step)
        for ch in channels.values():
            ch.flush()
        trained_at = time.time()
        say(f"trained {len(steps)} steps; waiting for every worker to install the last versions")
        final = {run: pubs[run].records[-1].version for run in RUNS}
        settled = events.wait(
            lambda e: all(
                len(e.holding(run)) == cfg.workers and min(e.holding(run).values()) >= v
                for run, v in final.items()
            ),
            cfg.settle_s,
        )
    finally:
        for ch in channels.values():
            ch.close()
        intake.stop()
    fleet.shut_down(events)
    say(
        "fleet " + ("settled" if settled else f"NOT settled within {cfg.settle_s:g} s") + "; "
        "workers stopped; reading the status objects"
    )
    return _report(
        cfg, model, large, pubs, steps, filt, events, stores, urls,
        {"started_at_s": started_at, "trained_at_s": trained_at, "settled": settled},
    )  # fmt: skip


def _report(
    cfg: DemoConfig,
    model: Policy,
    large: LargeModel,
    pubs: dict[str, RunPublisher],
    steps: list[StepRecord],
    filt: StalenessFilter[dict[str, Any]],
    events: EventLog,
    stores: dict[str, dict[str, Any]],
    urls: dict[str, dict[str, str]],
    timing: dict[str, Any],
) -> dict[str, Any]:
    digests = {(r.run, r.version): r.digest for p in pubs.values() for r in p.records}
    for e in events.installs:
        e["digest_ok"] = digests.get((e["run"], e["version"])) == e["digest"]
    phases = rep.install_phases(events.installs)
    bcast = {run: rep.t_bcast(stores[run]) for run in RUNS}
    large_params = sum(a.size for a in large.state.values())
    report: dict[str, Any] = {
        "config": {**asdict(cfg), "staleness": cfg.staleness, "workers": cfg.workers},
        "buckets": urls,
        "sizes": {
            "policy_params": param_count(model),
            "policy_bytes": 2 * param_count(model),
            "large_params": large_params,
            "large_bytes": 2 * large_params,
        },
        "timing": {**timing, "ended_at_s": time.time()},
        "versions": {run: [r.to_dict() for r in pubs[run].records] for run in RUNS},
        "installs": phases,
        "phase_medians": {run: rep.phase_medians(phases, run) for run in RUNS},
        "delta_lever": {
            run: rep.delta_lever(
                [r.to_dict() for r in pubs[run].records],
                [p for p in phases if p["run"] == run],
                pubs[run].config.max_delta_fraction,
            )
            for run in RUNS
        },
        "t_bcast": bcast,
        "trajectories": {
            **rep.trajectories(filt.snapshot(), events.summaries, cfg.group),
            "trained_ages": rep.trained_ages(steps, cfg.group),
        },
        "steps": [s.to_dict() for s in steps],
        "workers": events.summaries,
    }
    report["planner"] = _planner(cfg, report)
    report["checks"] = _checks(cfg, report)
    return report


def _planner(cfg: DemoConfig, report: dict[str, Any]) -> dict[str, Any]:
    """The planner's models fed with this run's measurements, beside what it measured."""
    polls = {"policy": cfg.poll_interval_s, "large": cfg.large_poll_interval_s}
    bcast = {run: plan.t_bcast(report, run, polls[run]) for run in RUNS}
    # The rule's T_bcast runs from the publish call to 90% of the fleet generating.
    since_call = {
        run: None if b["predicted_s"] is None else plan.publish_s(report, run) + b["predicted_s"]
        for run, b in bcast.items()
    }
    learner = plan.learner(report, report["config"], cfg.queue_rollouts, since_call["policy"])
    fulls = [v for v in report["versions"]["large"] if v["kind"] == "full"]
    biggest = max(fulls, key=lambda v: v["stored_bytes"])
    common = {
        "t_train_s": learner["inputs"]["t_train_s"],
        "batch": cfg.groups_per_step * cfg.group,
        "staleness": cfg.staleness,
        "worker_rollouts_per_s": statistics.median(learner["inputs"]["worker_rollouts_per_s"]),
        "workers": cfg.workers,
        "downlink_mbps": statistics.median(
            w["link"]["downlink_mbps"] for w in bcast["policy"]["model"]["workers"].values()
        ),
        "upload_mbps": biggest["stored_bytes"] * len(REGIONS) * 8e-6 / biggest["upload_commit_s"],
        "regions": len(REGIONS),
        "dropped_fraction": learner["inputs"]["dropped_fraction"],
    }
    idle = {k: learner[k] for k in ("predicted_share", "measured_share", "within_10_points")}
    out: dict[str, Any] = {"learner": learner}
    for run, params in (("policy", "policy_params"), ("large", "large_params")):
        density = rep._median_of([v["changed_fraction"] for v in report["versions"][run][1:]])
        rule = plan.capacity_rule(
            {
                **common,
                "params": report["sizes"][params],
                "density": max(density or 1.0, 1e-6),
                "poll_interval_s": polls[run],
                "t_bcast_s": since_call[run],
            }
        )
        # The learner's trajectories carry the policy run's versions: the large run reaches
        # it only through the workers' time spent installing it, in the measured pool rate.
        out[run] = {
            "t_bcast": bcast[run],
            "capacity_rule": rule,
            "learner_idle": {**idle, "versions_from": "policy"},
        }
    large_density = rep._median_of([v["changed_fraction"] for v in report["versions"]["large"]])
    out["reference_8b"] = plan.planner_8b(large_density or 0.01)
    return out


def _checks(cfg: DemoConfig, report: dict[str, Any]) -> dict[str, Any]:
    bad = [i for i in report["installs"] if not i["digest_ok"]]
    oldest = max((int(a) for s in report["steps"] for a in s["ages"]), default=0)
    everywhere = rep.reached_all(report["t_bcast"]["policy"]["fleet"])
    return {
        "installs": len(report["installs"]),
        "installs_not_matching_published_bits": len(bad),
        "oldest_trained_age": oldest,
        "budget": cfg.staleness,
        "policy_versions_reached_every_worker": len(everywhere),
        "ok": not bad and oldest <= cfg.staleness and bool(everywhere),
    }


def _parse(argv: list[str] | None) -> tuple[DemoConfig, Path]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    d = DemoConfig()
    p.add_argument("--steps", type=int, default=d.steps, help="learner steps (a multiple of kappa)")
    p.add_argument(
        "--kappa", type=int, default=d.kappa, help="publish every kappa steps; S = kappa + 1"
    )
    p.add_argument("--workers-per-region", type=int, default=d.workers_per_region)
    p.add_argument(
        "--large-layers", type=int, default=d.large_layers, help="decoder layers of the large run"
    )
    p.add_argument("--delta", choices=DELTA_MODES, default=d.delta)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    a = p.parse_args(argv)
    try:
        cfg = DemoConfig(
            steps=a.steps, kappa=a.kappa, workers_per_region=a.workers_per_region,
            large_layers=a.large_layers, delta=a.delta, seed=a.seed,
        )  # fmt: skip
    except (ValueError, Exception) as exc:
        p.error(str(exc))
    return cfg, a.out_dir


def main(argv: list[str] | None = None) -> int:
    from rl_demo_render import plot, print_report

    cfg, out_dir = _parse(argv)
    out_dir.mkdir(parents=True, exist_ok=True)
    say = Progress()
    os.environ.update(CREDENTIALS)  # the local server's keys, for us and the workers
    try:
        with local_s3() as endpoint:
            say(f"local S3 endpoint {endpoint}; starting {cfg.workers} rollout worker processes")
            report = run_demo(cfg, endpoint, say)
    except (DemoError, WanrlError) as exc:
        print(f"demo FAILED: {exc}", file=sys.stderr)
        return 1
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, default=str))
    png = plot(report, out_dir / "demo.png")
    print_report(report)
    print(f"\nreport: {out_dir / 'report.json'}\npicture: {png}")
    if not report["checks"]["ok"]:
        print("demo FAILED: see checks above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
