"""A fleet on emulated WAN links: measured T_bcast beside the planner's, buckets and a peer chain.

    .venv/bin/python benchmarks/wan_fleet.py [--hosts 10] [--seed 7] [--mib 16] [--deltas 8]
        [--down-mbit 10 100] [--rtt-ms 10 200] [--rate-scale 1] [--chains 2]
        [--uplink-queue acks-first|fifo] [--phases bucket,chain,cdn,outage] [--cdn-edges 2]
        [--edge-rtt-ms 20] [--store moto|seaweed-cluster] [--outage-s 10] [--ns-prefix wfl]
        [--json]

Root and iproute2 only. Every rollout host is its own network namespace joined to
this one by a veth pair with a tbf each way (its downlink and its uplink); its
round trip is a user-space delay line in this namespace (no netem on this kernel,
see benchmarks/wan.py). Rates and round trips are drawn from --seed: downlinks
log-uniform in --down-mbit (times --rate-scale), uplinks 0.5-1x the downlink,
round trips uniform in --rtt-ms. Each link queues up to 100 ms of data; on the
uplinks, bare ACKs go first (--uplink-queue acks-first, as a host's fair-queueing qdisc
sends them; the default) or wait in the same FIFO (fifo). A chain relay, which receives
while it forwards, is slower with fifo: docs/benchmarks.md. Everything is removed on
exit, failure included.

    root namespace: moto S3 on 127.0.0.1, the trainer, delay lines
       |  10.1xx.<i>.1 ==veth, tbf down==> 10.1xx.<i>.2   namespace <prefix>-<pid>-<i>:
       |               <==veth, tbf up====                 `wanrl-s3 worker`, a chain relay

--ns-prefix names every namespace this run makes (default wfl), so that runs of
several people on one machine never collide.

Regional store: moto in the root namespace (--store moto, the default), or a SeaweedFS
cluster on three machines of its own (--store seaweed-cluster: a master, three volume
servers keeping two copies of everything, a filer and the S3 gateway, each machine a
namespace on a bridge; benchmarks/wan_fleet_outage.py). With the cluster, the outage
phase runs too (benchmarks/cluster_outage.py): a volume server that holds the version
being downloaded crashes and comes back after --outage-s, then the filer does, while
the workers download a keyframe and deltas; every worker must converge bit-exact,
nothing may be lost or partly installed, every worker's failures must show in
`wanrl-s3 status`, and the run exits 1 if any of its counters is not 0.

Object storage: a `wanrl-s3 worker` per host; the trainer publishes a keyframe, then
--deltas deltas every --cadence-s; T_bcast at 90% and the tail per version come from
the workers' status objects (wanrl_s3.fleet_report, as `wanrl-s3 status`), measured
from each manifest's commit.

CDN (benchmarks/wan_fleet_cdn.py): the same workers with ``--cdn-url``, each reading
manifests and payload from one of --cdn-edges nginx caching edges, each edge in its own
namespace on the workers' side of their links and --edge-rtt-ms from the bucket; a fresh
run (s3://fleet/cdn) published the same way. Besides T_bcast, each edge's logs give the
bucket's fill per version (each slice fetched once per edge) and what the edges served,
beside the planner's CDN traffic for the same fleet (``cdn_download_traffic``: one copy
per edge reached, every worker's copy from an edge).

Peer chain (a baseline, not a product feature): the same hosts relay payloads of the
same sizes chunk by chunk, store-and-forward (benchmarks/wan_fleet_relay.py), in --chains
chains dealt as the planner deals them, and install each version with the product's own
code (the keyframe, then the first delta onto it) from a local copy of the run; a hop
from host a to host b crosses a's uplink, a delay line of (rtt_a + rtt_b) / 2 each way
and b's downlink. Measured from the
trainer's first byte. The trainer's own uplink is not shaped (each head gets its
downlink), and the planner is told so.

Beside each measurement, the planner's prediction (wanrl_s3.cost) for the same fleet
file (--fleet-out), fed what was measured on this machine first: the install rates (full,
and delta from the keyframe: ``pull_to_file`` in this process from a local copy of the
run, so no store requests) and the store's answer time per request (added to each
link's round trip, as a request to the bucket sees it). The CPU idle share per
phase, and a run at --rate-scale 0.5, show whether the machine or the links set the pace.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wan_fleet_cdn import cdn_urls, edges, egress, read_logs
from wan_fleet_net import (  # benchmarks/ is on sys.path[0]
    UPLINK_QUEUES,
    Children,
    Host,
    cpu_times,
    delay_line,
    draw_links,
    idle_share,
    namespaces,
    wait,
)
from wan_fleet_outage import STORES, outage_lines, outage_phase, regional_store
from wan_fleet_relay import send_version

from wanrl_s3 import (
    InfeasiblePlanError,
    PlanInputs,
    PublishConfig,
    Publisher,
    Subscriber,
    estimate,
    fleet_report,
    load_prices,
    load_snapshot,
    open_store,
    pull_to_file,
    read_statuses,
)
from wanrl_s3.cost import (
    FetchModel,
    FleetLinks,
    TrainerUplink,
    at_fraction_s,
    cdn_download_traffic,
    cdn_read_s,
    chain_layout,
    chain_worker_times_s,
    fleet_to_csv,
    object_storage_fleet_s,
    object_storage_worker_s,
    parse_fleet,
)
from wanrl_s3.testing import (
    allow_edge_reads,
    make_bucket,
    nudge_state,
    random_bf16_state,
    worker_command,
)

RELAY = Path(__file__).resolve().parent / "wan_fleet_relay.py"
RELAY_PORT = 7070
CHUNK_BYTES = 1 << 20
URL = "s3://fleet/run"
CDN_PREFIX = "cdn"  # the CDN phase's own run, in the same bucket
CDN_URL = f"s3://fleet/{CDN_PREFIX}"
PHASES = ("bucket", "chain", "cdn", "outage")  # outage: with --store seaweed-cluster only


@dataclass(frozen=True)
class Row:
    topology: str  # object_storage | cdn | peer_chain
    kind: str  # full | delta
    measured_t_bcast_s: float
    predicted_t_bcast_s: float
    tail_s: float | None
    versions: list[dict]
    cpu_idle_share: float
    breakdown: dict | None = None  # object storage: medians over workers of each step
    per_host: list[dict] | None = None  # each host's install time, measured and predicted
    # object storage: the planner fed the round trips the workers measured to the bucket
    # (their status objects, as `estimate --from-status` reads them) instead of the links'
    predicted_worker_rtt_s: float | None = None
    # cdn: bytes per version, measured from the edges' logs beside the planner's traffic
    egress: dict | None = None

    def to_dict(self) -> dict:
        ratio = self.predicted_t_bcast_s / self.measured_t_bcast_s
        out = {**self.__dict__, "ratio": round(ratio, 3)}
        if self.predicted_worker_rtt_s is not None:
            by_rtt = self.predicted_worker_rtt_s
            out["ratio_worker_rtt"] = round(by_rtt / self.measured_t_bcast_s, 3)
        return out


# -- object storage ----------------------------------------------------------------------
def policy(mib: float, seed: int) -> dict[str, np.ndarray]:
    """A bf16 state of about ``mib`` MiB in eight tensors."""
    n = int(mib * 2**20 / 2 / 8)
    return random_bf16_state([(f"layer.{i}.weight", (n,)) for i in range(8)], seed=seed)


@dataclass(frozen=True)
class Install:
    """What the planner is fed about this machine, measured before the chain phase."""

    full_mb_per_s: float
    delta_mb_per_s: float
    request_s: float = 0.0  # the store's answer time per request (loopback)


def calibrate_install_mb_per_s(mirror_url: str, raw: int, deltas: int, work: Path) -> Install:
    """This machine's install rates, full and delta (v2 from v1), as the model defines
    them: verify, decode and write once the bytes are here. In this process, with the
    product's ``pull_to_file`` from the run's local file:// copy (no store round trips,
    no process start: the model counts the requests itself), best of three."""
    held = work / "calib.v1.safetensors"

    def rate(version: int, out: Path, have_path: Path | None) -> float:
        times = []
        with Subscriber(open_store(mirror_url)) as sub:
            for _ in range(3):
                have = load_snapshot(have_path) if have_path else None
                start = time.perf_counter()
                pull_to_file(sub, out, version, have=have)
                times.append(time.perf_counter() - start)
        return raw / 1e6 / min(times)

    full = rate(1, held, None)
    delta = rate(2, work / "calib.v2.safetensors", held) if deltas else full
    return Install(full, delta)


def measure_request_s(endpoint: str, samples: int = 30, copy_of: str = URL) -> float:
    """The store's time to answer one small request as a worker's client sees it, over
    loopback (no link): the median of LATEST reads and listings of a version's folder.
    A request's round trip to the bucket is the link's round trip plus this."""
    store = open_store(copy_of, endpoint_url=endpoint)
    times = []
    for _ in range(samples):
        for call in (lambda: store.get_bytes("LATEST"), lambda: list(store.list("v/"))):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def start_workers(kids: Children, hosts: list[Host], fleet: FleetLinks, endpoint: str, args,
                  work, url: str = URL, cdn: list[str] | None = None,
                  extra: tuple[str, ...] = ()):  # fmt: skip
    """A `wanrl-s3 worker` in each host, reading ``url`` at ``endpoint`` through the host's
    delay line (and through ``cdn[i]`` if given), with ``extra`` flags."""
    procs, store = [], urllib.parse.urlsplit(endpoint)
    for i, (host, link) in enumerate(zip(hosts, fleet.workers, strict=True)):
        far = delay_line(kids, host.host_ip, (store.hostname or "", store.port or 80),
                         link.rtt_s / 2)  # fmt: skip
        through = ["--cdn-url", cdn[i]] if cdn else []
        argv = worker_command(
            url, far, str(work / link.name), link.name, args.poll_interval_s,
            "--concurrency", "4", *through, *extra,
        )  # fmt: skip
        log = (work / f"{link.name}.log").open("w")
        procs.append(kids.start(host.argv(*argv), stderr=log, stdout=log))
    return procs


def object_storage_phase(
    args, fleet: FleetLinks, hosts: list[Host], endpoint: str, work: Path, url: str = URL,
    kids: Children | None = None, cdn: list[str] | None = None,
):  # fmt: skip
    """Workers, a keyframe, deltas at a cadence; the fleet report, per version. With ``cdn``
    (each host's CDN URL), the workers read through it, and ``kids`` is the caller's."""
    store = open_store(url, endpoint_url=endpoint)
    kids = kids or Children()
    state = policy(args.mib, args.seed)
    publisher = Publisher(store, PublishConfig(delta="always", keyframe_every=1000))
    try:
        start_workers(kids, hosts, fleet, endpoint, args, work, url, cdn)
        names = {w.name for w in fleet.workers}
        wait(lambda: names <= {s.worker_id for s in read_statuses(store)}, 120, "the workers")
        cpu = cpu_times()
        results = [publisher.publish(state, 1)]
        reached = lambda v: all(s.installed_version == v for s in read_statuses(store))  # noqa: E731
        wait(lambda: reached(1), 600, "the keyframe")
        for v in range(2, 2 + args.deltas):
            time.sleep(args.cadence_s)
            state = nudge_state(state, args.density / 100, seed=v)
            results.append(publisher.publish(state, v))
        wait(lambda: reached(1 + args.deltas), 600, "the last delta")
        idle = idle_share(cpu)
    finally:
        kids.stop()
    with Subscriber(store) as sub:
        published = {r.version: sub.manifest(r.version).created_at_s for r in results}
    statuses = read_statuses(store)
    report = fleet_report(statuses, published, max(published), args.fraction)
    return results, report, idle, statuses, published


def cdn_phase(args, fleet: FleetLinks, hosts: list[Host], endpoint: str, work: Path):
    """The object-storage phase again, on a fresh run read through --cdn-edges edges; and
    the edges' logs, read before the edges go."""
    allow_edge_reads(endpoint, "fleet", CDN_PREFIX)
    kids = Children()
    try:
        with edges(args.cdn_edges, endpoint, args.edge_rtt_ms / 1e3, kids) as found:
            rtts = [w.rtt_s for w in fleet.workers]
            urls = cdn_urls(kids, hosts, rtts, found, f"fleet/{CDN_PREFIX}")
            (work / "cdn").mkdir()
            bucket = object_storage_phase(args, fleet, hosts, endpoint, work / "cdn", CDN_URL,
                                          kids, urls)  # fmt: skip
            logs = read_logs(found)
    finally:
        kids.stop()
    return bucket, logs


STEPS = {
    "seen_s": lambda i: i["seen_at_s"] - i["published_at_s"],
    "seen_to_ready_s": lambda i: i["ready_at_s"] - i["seen_at_s"],
    "download_s": lambda i: i["download_s"],
    "verify_s": lambda i: i["verify_s"],
    "apply_s": lambda i: i["apply_s"],
}


def breakdown(statuses, versions: set[int]) -> dict[str, float]:
    """Median over the workers' installs of ``versions`` of each step the model adds up."""
    installs = [i for s in statuses for i in s.installs if i["version"] in versions]
    return {k: round(statistics.median(f(i) for i in installs), 3) for k, f in STEPS.items()}


# -- peer chain ------------------------------------------------------------------------------
def mirror(endpoint: str, work: Path, run_url: str = URL) -> str:
    """A file:// copy of the run, from which every chain host installs (no link in the way)."""
    src, url = open_store(run_url, endpoint_url=endpoint), f"file://{work / 'mirror'}"
    dst = open_store(url)
    for info in src.list():
        dst.put_bytes(info.key, src.get_bytes(info.key))
    return url


def chain_hops(kids: Children, hosts: list[Host], fleet: FleetLinks, layout, mirror_url, work):
    """Relays in every host, delay lines between them; each chain head's endpoint, the relays."""
    heads, relays = [], {}
    for chain in layout:
        nxt = "-"
        for pos in reversed(range(len(chain))):
            i = chain[pos]
            host, link = hosts[i], fleet.workers[i]
            argv = [sys.executable, str(RELAY), host.far_ip, str(RELAY_PORT), nxt]
            argv += [mirror_url, str(work / f"{link.name}.chain")]
            proc = relays[i] = kids.start(host.argv(*argv), stdout=subprocess.PIPE)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            before_rtt = fleet.workers[chain[pos - 1]].rtt_s if pos else 0.0
            listen = hosts[chain[pos - 1]].host_ip if pos else "127.0.0.1"
            one_way = (before_rtt + link.rtt_s) / 2
            nxt = delay_line(kids, listen, (host.far_ip, RELAY_PORT), one_way).split("//")[-1]
        heads.append(nxt)
    return heads, relays


#: What the chain sends and installs per kind: (version, the version it is applied to).
CHAIN_VERSIONS = {"full": (1, 0), "delta": (2, 1)}


def chain_phase(
    args, fleet: FleetLinks, hosts: list[Host], payloads: dict[str, int], mirror_url, work
):
    kids = Children()
    out = {}
    try:
        layout = chain_layout(fleet, args.chains)
        heads, relays = chain_hops(kids, hosts, fleet, layout, mirror_url, work)
        for kind, nbytes in payloads.items():
            cpu = cpu_times()
            payload = os.urandom(nbytes)
            start = time.time()
            senders = [
                threading.Thread(
                    target=send_version, args=(h, payload, CHUNK_BYTES, *CHAIN_VERSIONS[kind])
                )
                for h in heads
            ]
            for t in senders:
                t.start()
            for t in senders:
                t.join()
            done = {i: json.loads(p.stdout.readline()) for i, p in relays.items()}
            installed = [done[i]["installed_at_s"] - start for i in range(len(fleet))]
            install_s = [done[i]["installed_at_s"] - done[i]["received_at_s"]
                         for i in range(len(fleet))]  # fmt: skip
            first_s = [done[i]["chunks_at_s"][0] - start for i in range(len(fleet))]
            out[kind] = (installed, install_s, first_s, idle_share(cpu))
    finally:
        kids.stop()
    return out


def worker_rows(fleet: FleetLinks, statuses, published, chosen, predicted) -> list[dict]:
    """Each worker's install time after the commit, averaged over ``chosen``, beside its
    own prediction (a miss at the fraction traced to hosts)."""
    by_id = {s.worker_id: s for s in statuses}
    wanted = {r.version for r in chosen}
    rows = []
    for w, p in zip(fleet.workers, predicted, strict=True):
        done = [i["installed_at_s"] - published[i["version"]]
                for i in by_id[w.name].installs if i["version"] in wanted]  # fmt: skip
        measured = round(statistics.mean(done), 3) if done else None
        rtt = by_id[w.name].round_trip_s  # the worker's own measure (quickest start-up HEAD)
        rows.append({"host": w.name, "measured_s": measured, "predicted_s": round(p, 3),
                     "rtt_ms": w.rtt_ms,
                     "worker_rtt_ms": None if rtt is None else round(rtt * 1e3, 1)})  # fmt: skip
    return rows


def with_worker_rtts(fleet: FleetLinks, statuses) -> FleetLinks:
    """The fleet with each link's round trip as its worker measured it to the bucket (the
    quickest of a few HEADs at start-up): the link's delay plus the store's time to answer."""
    measured = {s.worker_id: s.round_trip_s for s in statuses if s.round_trip_s is not None}
    return FleetLinks(tuple(
        replace(w, rtt_ms=measured[w.name] * 1e3) if w.name in measured else w
        for w in fleet.workers
    ))  # fmt: skip


def as_requests_see_it(fleet: FleetLinks, request_s: float) -> FleetLinks:
    """The fleet with each round trip as a request to the bucket sees it: the link's delay
    plus the store's answer time (the planner's ``rtt_ms``, docs/sizing-and-cost.md)."""
    return FleetLinks(tuple(replace(w, rtt_ms=w.rtt_ms + request_s * 1e3) for w in fleet.workers))


def fetch_model(args, install: Install) -> FetchModel:
    return FetchModel(
        args.poll_interval_s,
        install_mb_per_s=install.full_mb_per_s,
        delta_install_mb_per_s=install.delta_mb_per_s,
    )


def predict_bucket(args, bucket_fleet: FleetLinks, install: Install, gb, delta: bool):
    """The planner's object-storage T_bcast at the fraction, and each worker's time, as
    ``wanrl-s3 status`` times them: from the manifest's stamp, so the commit's requests
    (the trainer's, on loopback here: the store's answer time each) come first, then each
    worker's fetch over ``bucket_fleet``'s round trips. ``gb``: (payload, snapshot)."""
    fetch = fetch_model(args, install)
    commit_s = TrainerUplink(1, 1e3, install.request_s).commit_s
    bucket = commit_s + object_storage_fleet_s(bucket_fleet, *gb, fetch, args.fraction, delta)
    per_worker = [commit_s + object_storage_worker_s(w, *gb, fetch, delta)
                  for w in bucket_fleet.workers]  # fmt: skip
    return bucket, per_worker


def predict_chain(args, fleet: FleetLinks, install: Install, gb, delta: bool):
    """The planner's peer-chain T_bcast at the fraction and each host's time, from the
    trainer's first byte (a chain asks the store nothing)."""
    b0 = args.chains * max(w.downlink_mbps for w in fleet.workers) * 2  # unshaped trainer
    times = chain_worker_times_s(
        fleet, *gb, b0, fetch_model(args, install), CHUNK_BYTES / 1e6, args.chains, delta=delta
    )
    return at_fraction_s(times, args.fraction), times


def kinds(results) -> list[tuple[str, list]]:
    """The versions each row averages: the keyframe, and the deltas (if any)."""
    return [(k, chosen) for k, chosen in (("full", results[:1]), ("delta", results[1:])) if chosen]


def bucket_rows(args, fleet, install, bucket, topology: str = "object_storage", logs=None):
    """The measured rows of a phase through the bucket (or, with ``logs``, its edges)."""
    results, report, bucket_idle, statuses, published = bucket
    raw = results[0].raw_bytes
    spreads = {v.version: v for v in report.versions}
    rows = []
    for kind, chosen in kinds(results):
        measured = [spreads[r.version].t_bcast_s for r in chosen]
        tails = [spreads[r.version].tail_s for r in chosen]
        stored = int(statistics.mean(r.stored_bytes for r in chosen))
        delta = kind == "delta"
        gb = stored / 1e9, raw / 1e9
        requests = as_requests_see_it(fleet, install.request_s)
        predicted, worker_times = predict_bucket(args, requests, install, gb, delta)
        by_rtt = predict_bucket(args, with_worker_rtts(fleet, statuses), install, gb, delta)[0]
        if logs is not None:  # the planner's CDN rows: the bucket's, through the edges
            through_s = cdn_read_s(fill_rtt_s(args, install), install.request_s, len(fleet),
                                   args.cdn_edges)  # fmt: skip
            predicted, by_rtt = predicted + through_s, by_rtt + through_s
            worker_times = [t + through_s for t in worker_times]
        versions = [
            {"version": r.version, "stored_bytes": r.stored_bytes, "t_bcast_s": t, "tail_s": tail}
            for r, t, tail in zip(chosen, measured, tails, strict=True)
        ]
        rows.append(
            Row(topology, kind, statistics.mean(measured), predicted,
                statistics.mean(tails) if None not in tails else None, versions, bucket_idle,
                breakdown(statuses, {r.version for r in chosen}),
                per_host=worker_rows(fleet, statuses, published, chosen, worker_times),
                predicted_worker_rtt_s=by_rtt,
                egress=None if logs is None else cdn_egress(args, fleet, chosen, logs))
        )  # fmt: skip
    return rows


def fill_rtt_s(args, install: Install) -> float:
    """An edge's round trip to the bucket on a miss, as the planner's --cdn-fill-rtt-ms means
    it: the edge's delay line and the store's answer time."""
    return args.edge_rtt_ms / 1e3 + install.request_s


def cdn_egress(args, fleet: FleetLinks, chosen, logs) -> dict:
    """Per version of ``chosen``, averaged: the payload bytes the bucket sent the edges and
    the edges sent the workers, measured, beside the planner's CDN traffic for this fleet."""
    measured = [egress(logs, CDN_PREFIX, r.version) for r in chosen]
    stored = statistics.mean(r.stored_bytes for r in chosen)
    plan = cdn_download_traffic(stored / 1e9, CHUNK_BYTES / 1e6, len(fleet), args.cdn_edges)
    return {
        "fill_bytes": statistics.mean(m["fill_bytes"] for m in measured),
        "predicted_fill_bytes": plan.cdn_fill_gb * 1e9,
        "served_bytes": statistics.mean(m["served_bytes"] for m in measured),
        "predicted_served_bytes": plan.cdn_egress_gb * 1e9,
        "fill_bytes_per_edge": [
            statistics.mean(m["fill_bytes_per_edge"][k] for m in measured)
            for k in range(args.cdn_edges)
        ],
        "max_fetches_of_a_slice_per_edge": max(
            m["max_fetches_of_a_slice_per_edge"] for m in measured
        ),
    }


def chain_rows(args, fleet, install, results, chain) -> list[Row]:
    raw = results[0].raw_bytes
    rows = []
    for kind, chosen in kinds(results):
        stored = int(statistics.mean(r.stored_bytes for r in chosen))
        gb = stored / 1e9, raw / 1e9
        chained, host_times = predict_chain(args, fleet, install, gb, kind == "delta")
        installed, install_s, first_s, idle = chain[kind]
        t90 = at_fraction_s(installed, args.fraction)
        tail = max(installed) - t90
        hosts = [
            {"host": w.name, "measured_s": round(m, 3), "predicted_s": round(p, 3),
             "first_chunk_s": round(f, 3), "install_s": round(i, 3)}  # last byte to install
            for w, m, p, f, i in zip(fleet.workers, installed, host_times, first_s, install_s,
                                     strict=True)
        ]  # fmt: skip
        rows.append(
            Row("peer_chain", kind, t90, chained, tail, [{"stored_bytes": stored}], idle,
                per_host=hosts)
        )  # fmt: skip
    return rows


def rows_for(args, fleet, install, results, bucket, chain, cdn) -> list[Row]:
    """Every phase that ran: its rows, each beside the planner's prediction."""
    rows = [] if bucket is None else bucket_rows(args, fleet, install, bucket)
    if cdn is not None:
        rows += bucket_rows(args, fleet, install, cdn[0], "cdn", cdn[1])
    if chain is not None:
        rows += chain_rows(args, fleet, install, results, chain)
    return rows


#: The planner's row each measurement stands for (its chain row ships full versions only).
PLANNER_ROWS = {
    ("object_storage", "full"): "object_storage_full",
    ("object_storage", "delta"): "object_storage_delta",
    ("cdn", "full"): "cdn_full",
    ("cdn", "delta"): "cdn_delta",
    ("peer_chain", "full"): "peer_chain",
}
#: Training step times at which the recommendation is compared (S = 3: window 2 T_train).
T_TRAIN_S = (2.0, 4.0, 8.0, 16.0, 64.0)
#: Two picks are a tie when their measured T_bcast differ by at most this share: routes
#: closer than the run's own spread, which a ranking by cost (then time) may take either way.
TIE_SHARE = 0.01


def compare_picks(t_train_s: float, modelled: PlanInputs, measured: PlanInputs, prices) -> dict:
    """The recommendation modelled and fed the measured T_bcast: "same", a "tie" (the two
    picks' measured T_bcast within :data:`TIE_SHARE`), or different."""
    plans = []
    for given in (modelled, measured):
        try:
            plans.append(estimate(given, prices))
        except InfeasiblePlanError:
            plans.append(None)
    picks = [p.recommended if p is not None else "none feasible" for p in plans]
    rows = {} if plans[1] is None else {r.name: r for r in plans[1].by_topology if r.feasible}
    times = [rows[p].t_bcast_s for p in picks if p in rows]
    tie = len(times) == 2 and abs(times[0] - times[1]) <= TIE_SHARE * times[1]
    return {
        "t_train_s": t_train_s, "predicted": picks[0], "measured": picks[1],
        "same": picks[0] == picks[1], "tie": picks[0] != picks[1] and tie,
        "measured_rows": {p: {"t_bcast_s": rows[p].t_bcast_s,
                              "usd_per_step": rows[p].total_usd_per_step}
                          for p in dict.fromkeys(picks) if p in rows},
    }  # fmt: skip


def verdict(pick: dict) -> str:
    """One comparison of :func:`compare_picks`, in words."""
    if pick["same"]:
        return "same"
    return f"a tie (measured T_bcast within {TIE_SHARE:.0%})" if pick["tie"] else "DIFFERENT"


def recommendations(args, fleet: FleetLinks, install: Install, rows: list[Row], raw: int):
    """The planner's recommendation for this fleet, modelled and fed the measured T_bcast.

    The same workload as the run (snapshot, delta and full sizes, poll, chains, the
    trainer's unshaped uplink; publish time near zero on loopback) at several step
    times, so that feasibility changes somewhere along the way; "same" is the goal.
    """
    sizes = {r.kind: r.versions[0]["stored_bytes"] for r in rows}
    measured = tuple(
        (PLANNER_ROWS[r.topology, r.kind], r.measured_t_bcast_s)
        for r in rows
        if (r.topology, r.kind) in PLANNER_ROWS
    )
    prices, out = load_prices(), []
    for t_train_s in T_TRAIN_S:
        inputs = PlanInputs(
            params=raw / 2, t_train_s=t_train_s, batch=64, staleness=3,
            density=sizes.get("delta", sizes["full"]) / raw, full_ratio=sizes["full"] / raw,
            fleet=as_requests_see_it(fleet, install.request_s), workers=len(fleet),
            poll_interval_s=args.poll_interval_s,
            install_mb_per_s=install.full_mb_per_s, chains=args.chains, chunk_mb=CHUNK_BYTES / 1e6,
            uplink_mbps=args.chains * max(w.downlink_mbps for w in fleet.workers) * 2,
            upload_mbps=1e6, cdn=None if "cdn" in args.phases else "none",  # the table's CDN
            cdn_edges=args.cdn_edges, cdn_fill_rtt_ms=fill_rtt_s(args, install) * 1e3,
            store_answer_ms=install.request_s * 1e3,
            include_unshipped=True,  # the chain was measured: rank it with the buckets
        )  # fmt: skip
        out.append(compare_picks(t_train_s, inputs, replace(inputs, measured_t_bcast_s=measured),
                                 prices))  # fmt: skip
    return out


def print_table(args, fleet: FleetLinks, install: Install, rows: list[Row]) -> None:
    print(
        f"{len(fleet)} hosts, seed {args.seed}: downlinks {args.down_mbit[0]:g}-"
        f"{args.down_mbit[1]:g} Mbit/s x {args.rate_scale:g}, round trips {args.rtt_ms[0]:g}-"
        f"{args.rtt_ms[1]:g} ms; {args.mib:g} MiB keyframe, {args.deltas} deltas at "
        f"{args.density:g}%; poll {args.poll_interval_s:g} s; install {install.full_mb_per_s:.0f} "
        f"MB/s full, {install.delta_mb_per_s:.0f} delta (in-process, local copy); store "
        f"answers in {install.request_s * 1e3:.1f} ms; uplinks {args.uplink_queue}; "
        f"T_bcast at {args.fraction:.0%}"
    )
    print(f"{'host':<8} {'down':>6} {'up':>6} {'rtt ms':>7}")
    for w in fleet.workers:
        print(f"{w.name:<8} {w.downlink_mbps:>6g} {w.uplink_mbps:>6g} {w.rtt_ms:>7g}")
    print(
        f"{'topology':<15} {'kind':<6} {'MB':>6} {'measured s':>11} {'predicted s':>12} "
        f"{'pred/meas':>9} {'tail s':>7} {'CPU idle':>9} {'pred/meas, worker rtt':>21}"
    )
    for r in rows:
        mb = r.versions[0]["stored_bytes"] / 1e6
        tail = "-" if r.tail_s is None else f"{r.tail_s:.2f}"
        by_rtt = r.predicted_worker_rtt_s
        by_rtt_ratio = "-" if by_rtt is None else f"{by_rtt / r.measured_t_bcast_s:.2f}"
        print(
            f"{r.topology:<15} {r.kind:<6} {mb:>6.2f} {r.measured_t_bcast_s:>11.2f} "
            f"{r.predicted_t_bcast_s:>12.2f} {r.predicted_t_bcast_s / r.measured_t_bcast_s:>9.2f} "
            f"{tail:>7} {r.cpu_idle_share:>9.0%} {by_rtt_ratio:>21}"
        )
    for r in rows:
        if r.egress is None:
            continue
        e = r.egress
        per_edge = " + ".join(f"{b / 1e6:.2f}" for b in e["fill_bytes_per_edge"])
        print(
            f"cdn {r.kind:<6} per version: bucket -> edges {e['fill_bytes'] / 1e6:.2f} MB "
            f"({per_edge}; planner {e['predicted_fill_bytes'] / 1e6:.2f}, "
            f"{e['fill_bytes'] / e['predicted_fill_bytes']:.2f}x), edges -> workers "
            f"{e['served_bytes'] / 1e6:.2f} MB (planner {e['predicted_served_bytes'] / 1e6:.2f}, "
            f"{e['served_bytes'] / e['predicted_served_bytes']:.2f}x); most fetches of one "
            f"slice by one edge: {e['max_fetches_of_a_slice_per_edge']}"
        )


def phases(text: str) -> tuple[str, ...]:
    chosen = tuple(p.strip() for p in text.split(","))
    if not chosen or set(chosen) - set(PHASES):
        raise argparse.ArgumentTypeError(f"phases are {','.join(PHASES)}; got {text!r}")
    return chosen


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--mib", type=float, default=16.0, help="keyframe size (default 16 MiB)")
    ap.add_argument("--deltas", type=int, default=8)
    ap.add_argument("--density", type=float, default=1.0, help="delta density %% (default 1)")
    ap.add_argument("--cadence-s", type=float, default=6.0, help="between deltas (default 6)")
    ap.add_argument("--poll-interval-s", type=float, default=0.5)
    ap.add_argument("--down-mbit", type=float, nargs=2, default=(10.0, 100.0))
    ap.add_argument("--rtt-ms", type=float, nargs=2, default=(10.0, 200.0))
    ap.add_argument("--rate-scale", type=float, default=1.0, help="all rates x this (0.5: half)")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--uplink-queue", choices=UPLINK_QUEUES, default="acks-first")
    ap.add_argument("--fraction", type=float, default=0.9)
    ap.add_argument("--phases", type=phases, default=None, metavar="P[,P...]",
                    help=f"what to measure, of {','.join(PHASES)} (default: all; outage "
                    "with the cluster only)")  # fmt: skip
    ap.add_argument("--store", choices=STORES, default="moto", help="the regional store")
    ap.add_argument("--outage-s", type=float, default=10.0,
                    help="how long each killed component stays down (default 10)")  # fmt: skip
    ap.add_argument("--ns-prefix", default="wfl", help="names this run's namespaces (default wfl)")
    ap.add_argument("--cdn-edges", type=int, default=2, help="edges in the CDN phase (default 2)")
    ap.add_argument("--edge-rtt-ms", type=float, default=20.0,
                    help="an edge's round trip to the bucket (default 20)")  # fmt: skip
    ap.add_argument("--fleet-out", type=Path, default=None, help="write the fleet file here")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args()
    cluster = args.store == "seaweed-cluster"
    args.phases = args.phases or tuple(p for p in PHASES if cluster or p != "outage")
    if "outage" in args.phases and not cluster:
        ap.error("the outage phase needs --store seaweed-cluster (a store whose parts can fail)")
    if os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")):
        raise SystemExit("benchmarks/wan_fleet.py needs root and iproute2 (ip, tc)")
    return args


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up the namespaces too
    fleet = parse_fleet(fleet_to_csv(draw_links(args)), "fleet.csv")  # as the planner reads it
    if args.fleet_out:
        args.fleet_out.write_text(fleet_to_csv(fleet))
    work = Path(tempfile.mkdtemp(prefix="wanrl-wan-fleet-"))
    bucket = cdn = chain = install = outage = None
    try:
        with (
            regional_store(args.store, args.ns_prefix) as (endpoint, cluster),
            namespaces(fleet, args.uplink_queue, args.ns_prefix) as hosts,
        ):
            make_bucket(endpoint, "fleet")
            if "bucket" in args.phases:
                bucket = object_storage_phase(args, fleet, hosts, endpoint, work)
            if "cdn" in args.phases:
                cdn = cdn_phase(args, fleet, hosts, endpoint, work)
            if bucket or cdn:
                results = (bucket or cdn[0])[0]  # type: ignore[index]
                run = URL if bucket else CDN_URL
                install, chain = calibrate_and_chain(args, fleet, hosts, endpoint, work, run,
                                                     results)  # fmt: skip
            if "outage" in args.phases:
                outage = outage_phase(args, fleet, hosts, cluster, work, start_workers, policy,
                                      nudge_state)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows, picks = [], []
    if install is not None:
        rows = rows_for(args, fleet, install, results, bucket, chain, cdn)
        picks = recommendations(args, fleet, install, rows, results[0].raw_bytes)
    emit(args, fleet, install, rows, picks, outage)
    if outage and any(n for r in outage for n in r.counters.values()):
        sys.exit(1)


def calibrate_and_chain(args, fleet: FleetLinks, hosts: list[Host], endpoint: str, work: Path,
                        url: str, results):  # fmt: skip
    """What the planner is fed (this machine's install rates, the store's answer time),
    measured on the run ``url`` (``results``: its publications); then the chain."""
    raw = results[0].raw_bytes
    copy = mirror(endpoint, work, url)
    install = calibrate_install_mb_per_s(copy, raw, args.deltas, work)
    install = replace(install, request_s=measure_request_s(endpoint, copy_of=url))
    payloads = {"full": results[0].stored_bytes}
    if args.deltas:
        payloads["delta"] = results[1].stored_bytes  # v2, the delta the chain installs
    chain = (
        chain_phase(args, fleet, hosts, payloads, copy, work) if "chain" in args.phases else None
    )
    return install, chain


def emit(args, fleet: FleetLinks, install: Install | None, rows: list[Row], picks, outage) -> None:
    """The table (or JSON) of every phase that ran."""
    if args.json:
        out = {**to_json(args, fleet, install, rows), "recommendation": picks}
        out["outage"] = None if outage is None else [r.to_dict() for r in outage]
        print(json.dumps(out, indent=1))
        return
    if install is not None:
        print_table(args, fleet, install, rows)
    for p in picks:
        print(
            f"T_train {p['t_train_s']:g} s: recommended {p['predicted']} (modelled), "
            f"{p['measured']} (fed the measured T_bcast): "
            + (
                "same"
                if p["same"]
                else "a tie (measured T_bcast within 1%)"
                if p["tie"]
                else "DIFFERENT"
            )
        )
    if outage is not None:
        print(f"outage phase ({args.store}, each component down {args.outage_s:g} s):")
        print("\n".join(outage_lines(outage)))


def to_json(args, fleet: FleetLinks, install: Install | None, rows: list[Row]) -> dict:
    return {
        "fleet_size": len(fleet),
        "seed": args.seed,
        "store": args.store,
        "uplink_queue": args.uplink_queue,
        "fraction": args.fraction,
        "snapshot_bytes": int(args.mib * 2**20 / 2 / 8) * 2 * 8,  # policy(): eight bf16 tensors
        "chains": args.chains,
        "poll_interval_s": args.poll_interval_s,
        "install_mb_per_s": None if install is None else {
            "full": round(install.full_mb_per_s),
            "delta": round(install.delta_mb_per_s),
        },
        "request_ms": None if install is None else round(install.request_s * 1e3, 2),
        "links": [w.__dict__ for w in fleet.workers],
        "results": [r.to_dict() for r in rows],
    }  # fmt: skip


if __name__ == "__main__":
    main()
