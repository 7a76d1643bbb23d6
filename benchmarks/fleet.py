"""Dissemination as the fleet sees it: 8 `wanrl-s3 worker` processes, one version.

    .venv/bin/python benchmarks/fleet.py [--workers 8] [--mib 256]

All workers and the moto server share this machine. The version is committed;
T_bcast is when 90% of the workers had installed it (the same code as
`wanrl-s3 status`), next to the payload divided by the per-worker throughput
the workers measured. Then the polling cost: conditional GETs of LATEST that a
worker makes per hour at the default interval, counted on the wire.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from wanrl_s3 import (
    PublishConfig,
    Publisher,
    Subscriber,
    WatchConfig,
    Watcher,
    fleet_report,
    open_store,
    read_statuses,
)
from wanrl_s3.testing import local_moto, make_bucket, worker_command

S3_GET_USD_PER_1000 = 0.0004  # AWS S3 Standard GET, us-east-1 (wanrl_s3/cost/prices.json)


def model(mib: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = mib * 2**20 // 2 // 8
    return {
        f"model.layers.{i}.mlp.up_proj.weight": rng.integers(0, 2**16, n, np.uint16).view(
            ml_dtypes.bfloat16
        )
        for i in range(8)
    }


def wait(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the workers")
        time.sleep(0.05)


def fleet_run(endpoint: str, url: str, workers: int, mib: int, work: Path) -> None:
    store = open_store(url, endpoint_url=endpoint)
    pub = Publisher(store, PublishConfig(delta="never"))
    pub.publish(model(1, 0), 1)
    procs = []
    for i in range(workers):
        out = work / f"w{i}"
        out.mkdir()
        procs.append(
            subprocess.Popen(
                worker_command(url, endpoint, str(out), f"w{i}", 1),
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        wait(lambda: sum(s.installed_version == 1 for s in read_statuses(store)) == workers, 120)
        result = pub.publish(model(mib, 1), 2)
        wait(lambda: sum(s.installed_version == 2 for s in read_statuses(store)) == workers, 600)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(30)
    statuses = read_statuses(store)
    with Subscriber(store) as sub:
        published = sub.manifest(2).created_at_s
    report = fleet_report(statuses, {2: published}, 2, 0.9)
    v2 = report.versions[0]
    installs = [next(i for i in s.installs if i["version"] == 2) for s in statuses]
    rates = [i["downloaded_bytes"] / i["download_s"] for i in installs]
    per_worker = float(np.median(rates))
    print(
        f"{workers} workers, one {result.raw_bytes / 1e6:.0f} MB full version through moto "
        "on this machine"
    )
    print(
        f"T_bcast (90% installed, from manifest commit): {v2.t_bcast_s:.2f} s; "
        f"tail to the last worker +{v2.tail_s:.2f} s"
    )
    print(
        f"median per-worker download throughput: {per_worker / 1e6:.1f} MB/s; "
        f"payload / throughput = {result.raw_bytes / per_worker:.2f} s"
    )
    print(
        "per worker: seen after publish {:.2f} s, download {:.2f} s, verify {:.2f} s, "
        "write {:.2f} s (medians)".format(
            *(
                float(np.median([i[k] - (published if k == "seen_at_s" else 0) for i in installs]))
                for k in ("seen_at_s", "download_s", "verify_s", "apply_s")
            )
        )
    )


def polling_cost(endpoint: str, url: str, seconds: float) -> None:
    store = open_store(url, endpoint_url=endpoint)
    gets = {"n": 0}

    def count(request, **_) -> None:  # GETs of LATEST, counted as they go on the wire
        if request.url.split("?")[0].endswith("/LATEST"):
            gets["n"] += 1

    store._client.meta.events.register("before-send.s3.GetObject", count)
    interval = 0.5
    with Subscriber(store) as sub:
        held = sub.fetch()  # already current: only polling is left to count
        with Watcher(sub, WatchConfig(poll_interval_s=interval), start_from=held):
            time.sleep(seconds)
    default = WatchConfig().poll_interval_s
    per_poll = gets["n"] / (seconds / interval)
    per_hour = per_poll * 3600 / default
    print(
        f"polling: {gets['n']} GETs of LATEST in {seconds:.0f} s at {interval} s interval "
        f"({per_poll:.2f} per poll, each a 304 when nothing changed)"
    )
    print(
        f"at the default {default:.0f} s interval: {per_hour:.0f} GETs per worker per hour = "
        f"${per_hour * S3_GET_USD_PER_1000 / 1000:.6f}/h at ${S3_GET_USD_PER_1000}/1000 GETs"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--poll-seconds", type=float, default=20.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wanrl-fleet-"))
    try:
        with local_moto() as endpoint:
            url = f"s3://{make_bucket(endpoint, 'fleet')}/run"
            fleet_run(endpoint, url, args.workers, args.mib, work)
            polling_cost(endpoint, url, args.poll_seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
