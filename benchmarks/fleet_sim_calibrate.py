"""``fleet_sim.py --calibrate FILE``: predict every row of a benchmarks/wan_fleet.py run.

The JSON that wan_fleet.py writes holds what the simulator needs: each host's link
(rates, round trip), the poll interval, the store's answer time per request, the
install rates measured on that machine, and per row the stored size of each version
with its measured T_bcast at the fraction. Object-storage rows are simulated as the
run went: a keyframe, then the deltas one at a time (the benchmark waits for the
whole fleet between them), each worker's round trip being its link's plus the
store's answer time (a request's round trip), T_bcast from the manifest's stamp,
which comes before the commit's three requests. The poll's phase is random, so a
row's prediction is the mean over ``replications`` seeded runs (the band: the 10th
to 90th percentile of those runs). Peer-chain rows: the same hosts relay chunks
store-and-forward in the planner's chain layout, simulated hop by hop (no
randomness: one run).

Older JSON does not record the snapshot size or the chain count (wan_fleet.py now
does); they default to the benchmark's defaults (16 MiB, 2 chains) and are checked
against the planner prediction recorded in the file, which depends on both: a
mismatch names the flag to pass.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import simpy
from fleet_sim_model import FleetSim, SimConfig, Version

from wanrl_s3 import UsageError, WatchConfig
from wanrl_s3.cost import (
    FetchModel,
    FleetLinks,
    TrainerUplink,
    WorkerLink,
    at_fraction_s,
    chain_layout,
    chain_worker_times_s,
    object_storage_fleet_s,
)

#: benchmarks/wan_fleet.py's defaults, for runs whose JSON predates recording them.
DEFAULT_SNAPSHOT_BYTES = 16 * 2**20
DEFAULT_CHAINS = 2
CHUNK_BYTES = 2**20  # the chain relay's chunk (wan_fleet.py CHUNK_BYTES)
MAX_RUN_BYTES = 16 << 20


@dataclass(frozen=True)
class Run:
    """What the simulator takes from one wan_fleet.py JSON."""

    name: str
    links: FleetLinks  # round trips as the workers' requests see them
    bare_links: FleetLinks  # the links' own round trips (the chain's hops)
    fetch: FetchModel
    request_s: float
    fraction: float
    snapshot_bytes: int
    chains: int
    uplink_queue: str
    rows: list[dict[str, Any]]


def _fail(path: Path, what: str) -> UsageError:
    return UsageError(f"--calibrate {path}: {what}")


def load_run(path: Path, snapshot_bytes: int | None, chains: int | None) -> Run:
    """Read and check one wan_fleet.py JSON (one line naming the problem if it is not one)."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_RUN_BYTES + 1)
        data = json.loads(raw)
    except OSError as exc:
        raise _fail(path, f"cannot read it: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(path, f"not JSON: {exc}") from exc
    if len(raw) > MAX_RUN_BYTES or not isinstance(data, dict):
        raise _fail(path, "not a benchmarks/wan_fleet.py --json object")
    try:
        bare = FleetLinks(tuple(WorkerLink(**w) for w in data["links"]))
        request_ms = float(data["request_ms"])
        fetch = FetchModel(
            float(data["poll_interval_s"]),
            install_mb_per_s=float(data["install_mb_per_s"]["full"]),
            delta_install_mb_per_s=float(data["install_mb_per_s"]["delta"]),
        )
        rows = [r for r in data["results"] if r["topology"] in ("object_storage", "peer_chain")]
        fraction = float(data["fraction"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(path, f"not a benchmarks/wan_fleet.py --json object ({exc!r} missing "
                          "or malformed)") from exc  # fmt: skip
    if not rows:
        raise _fail(path, "has no object_storage or peer_chain rows")
    links = FleetLinks(tuple(replace(w, rtt_ms=w.rtt_ms + request_ms) for w in bare.workers))
    snapshot = snapshot_bytes or int(data.get("snapshot_bytes", DEFAULT_SNAPSHOT_BYTES))
    chains = chains or int(data.get("chains", DEFAULT_CHAINS))
    run = Run(path.name, links, bare, fetch, request_ms / 1e3, fraction, snapshot, chains,
              str(data.get("uplink_queue", "")), rows)  # fmt: skip
    _check_inputs(path, run)
    return run


def _check_inputs(path: Path, run: Run) -> None:
    """The planner's prediction recorded in the file, recomputed from these inputs: a
    mismatch means a wrong snapshot size (--mib) or chain count (--chains)."""
    for row in run.rows:
        recorded = row["predicted_t_bcast_s"]
        ours = planner_t_bcast_s(run, row)
        if abs(ours - recorded) > 1e-3 * max(1.0, recorded):
            flag = "--chains N" if row["topology"] == "peer_chain" else "--mib N"
            raise _fail(path, f"the planner's {row['topology']} {row['kind']} prediction in the "
                              f"file ({recorded:.4f} s) is not reproduced from a "
                              f"{run.snapshot_bytes / 2**20:g} MiB snapshot and {run.chains} "
                              f"chains ({ours:.4f} s): pass the run's {flag}")  # fmt: skip


def _sizes(row: dict[str, Any]) -> list[int]:
    return [int(v["stored_bytes"]) for v in row["versions"]]


def planner_t_bcast_s(run: Run, row: dict[str, Any]) -> float:
    """The closed-form planner's prediction for ``row``, as wan_fleet.py computes it."""
    delta = row["kind"] == "delta"
    gb = statistics.mean(_sizes(row)) / 1e9, run.snapshot_bytes / 1e9
    if row["topology"] == "object_storage":
        commit_s = TrainerUplink(1, 1e3, run.request_s).commit_s
        return commit_s + object_storage_fleet_s(run.links, *gb, run.fetch, run.fraction, delta)
    b0 = run.chains * max(w.downlink_mbps for w in run.bare_links.workers) * 2
    times = chain_worker_times_s(run.bare_links, *gb, b0, run.fetch, CHUNK_BYTES / 1e6,
                                 run.chains, delta=delta)  # fmt: skip
    return at_fraction_s(times, run.fraction)


# -- object storage ---------------------------------------------------------------------
def bucket_runs_s(run: Run, row: dict[str, Any], replications: int) -> list[float]:
    """Per seeded run, T_bcast at the fraction averaged over the row's versions."""
    sizes = _sizes(row)
    delta = row["kind"] == "delta"
    keyframe = Version(1, "full", sizes[0] if not delta else 1)
    versions = (keyframe, *(Version(2 + i, "delta", s) for i, s in enumerate(sizes))) if delta \
        else (keyframe,)  # fmt: skip
    out = []
    for seed in range(replications):
        config = SimConfig(
            versions=versions, snapshot_bytes=run.snapshot_bytes, cadence_s=60.0,
            watch=WatchConfig(poll_interval_s=run.fetch.poll_interval_s), fetch=run.fetch,
            trainer_rtt_s=run.request_s, trainer_uplink_mbps=1e6, seed=seed, tail_s=600.0,
        )  # fmt: skip
        outcome = FleetSim(run.links, config).run()
        chosen = [v.number for v in versions if (v.kind == "delta") == delta]
        out.append(statistics.mean(at_fraction_s(outcome.t_bcast_s(v), run.fraction)
                                   for v in chosen))  # fmt: skip
    return out


# -- peer chain -----------------------------------------------------------------------------
def chain_times_s(run: Run, payload_bytes: int, delta: bool) -> list[float]:
    """Each host's install time from the trainer's first byte: chunks relayed hop by hop,
    a hop sending chunk j once it holds it and has sent j-1, at the slower of the sender's
    uplink and the receiver's downlink (goodput), plus the one-way latency between them."""
    env, fleet, fetch = simpy.Environment(), run.bare_links, run.fetch
    chunks = [CHUNK_BYTES] * (payload_bytes // CHUNK_BYTES)
    if payload_bytes % CHUNK_BYTES or not chunks:
        chunks.append(payload_bytes % CHUNK_BYTES)
    b0 = run.chains * max(w.downlink_mbps for w in fleet.workers) * 2
    done = [0.0] * len(fleet)

    def hop(ready: list[simpy.Event], send_mbps: float, latency_s: float, index: int):
        w = fleet.workers[index]
        rate = min(send_mbps, w.downlink_mbps) * 1e6 / 8 * fetch.goodput_share
        arrived = [env.event() for _ in chunks]
        env.process(_send(env, ready, arrived, chunks, rate, latency_s))
        return arrived

    for chain in chain_layout(fleet, run.chains):
        ready = [env.event().succeed() for _ in chunks]
        send_mbps, send_rtt_s = b0 / run.chains, 0.0
        for index in chain:
            w = fleet.workers[index]
            ready = hop(ready, send_mbps, (send_rtt_s + w.rtt_s) / 2, index)
            env.process(
                _install(
                    env, ready[-1], fetch.install_s(w, run.snapshot_bytes / 1e9, delta), done, index
                )
            )
            send_mbps, send_rtt_s = w.uplink_mbps, w.rtt_s
    env.run()
    return done


def _send(env, ready, arrived, chunks, rate, latency_s):
    for j, size in enumerate(chunks):
        yield ready[j]
        yield env.timeout(size / rate)
        env.timeout(latency_s).callbacks.append(lambda _, ev=arrived[j]: ev.succeed())


def _install(env, last_chunk, install_s, done, index):
    yield last_chunk
    yield env.timeout(install_s)
    done[index] = env.now


# -- the table ----------------------------------------------------------------------------
def predict(run: Run, replications: int) -> list[dict[str, Any]]:
    """One line per row of the run: measured, the simulator's and the planner's T_bcast."""
    lines = []
    for row in run.rows:
        measured = float(row["measured_t_bcast_s"])
        if row["topology"] == "object_storage":
            per_run = bucket_runs_s(run, row, replications)
            simulated = statistics.mean(per_run)
            band = statistics.quantiles(per_run, n=10) if len(per_run) > 1 else [simulated] * 9
            low, high = band[0], band[-1]
        else:
            sizes = _sizes(row)
            times = chain_times_s(run, int(statistics.mean(sizes)), row["kind"] == "delta")
            simulated = low = high = at_fraction_s(times, run.fraction)
        lines.append({
            "run": run.name, "uplink_queue": run.uplink_queue, "topology": row["topology"],
            "kind": row["kind"], "hosts": len(run.links), "measured_s": measured,
            "simulated_s": simulated, "band_s": [low, high],
            "planner_s": planner_t_bcast_s(run, row), "ratio": simulated / measured,
        })  # fmt: skip
    return lines
