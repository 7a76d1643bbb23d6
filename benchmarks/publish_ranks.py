"""Publish throughput with R = 1, 2, 4 publishing processes against one S3 endpoint (issue 17).

    .venv/bin/python benchmarks/publish_ranks.py [--gib 1] [--ranks 1,2,4] [--repeat 2]
        [--uplink-mbit N] [--json]

One snapshot of random bf16 tensors (64 MiB each, like an 8B model's MLP weights;
nothing compresses) is made once; R separate OS processes are forked from it,
so each sees every tensor, as FSDP ranks do, without a copy. Each builds its own
store client and a ``ShardedPublisher(rank=r, ranks=R)`` (balanced assignment),
waits at a barrier and publishes version 1: it encodes and uploads its share
(about 1/R of the bytes), posts its share record, and rank 0 merges and
commits. The time is from the barrier to the last rank's return (the commit
included); MB/s is the snapshot's bytes over that time.

The endpoint is moto's server, in its own process (``wanrl_s3.testing.local_moto``),
so it shares no GIL with a publisher. Next to each figure: the CPU the endpoint
used (cores: its CPU seconds over the wall time; one Python process cannot use
much more than one), the publishing processes' CPU, and the whole machine's busy
cores (everything running, other users included), which say where the run
saturates. Best of ``--repeat`` runs per R, each into a fresh bucket.

``--uplink-mbit N`` (root: network namespaces) gives each rank a host of its own
as far as the network goes: each process publishes from its own namespace
whose uplink is shaped to N Mbit/s (tbf), to the endpoint on a bridge. That is
the production shape (one trainer host per rank, each with its own NIC), and it
shows the scaling that a 2-core machine's CPU cannot: until the endpoint (or
this machine) saturates, R ranks move R uplinks' worth.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from wanrl_s3 import PublishConfig, ShardedPublisher, open_store
from wanrl_s3.testing import local_moto, make_bucket

MiB = 2**20
TENSOR_BYTES = 64 * MiB
TICKS_S = os.sysconf("SC_CLK_TCK")
CONFIG = PublishConfig(delta="never", full_coding="raw")  # random bits: no coding pays

_SNAPSHOT: dict[str, np.ndarray] = {}  # made before forking: every rank shares its pages


@dataclass(frozen=True)
class Run:
    ranks: int
    wall_s: float
    mb_s: float
    rank_s: list[float]
    endpoint_cores: float
    publisher_cores: float
    machine_busy_cores: float


def make_snapshot(gib: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    count = max(1, round(gib * 2**30 / TENSOR_BYTES))
    return {
        f"model.layers.{i}.mlp.up_proj.weight": rng.integers(
            0, 2**16, TENSOR_BYTES // 2, dtype=np.uint16
        ).view(ml_dtypes.bfloat16)
        for i in range(count)
    }


# -- shaped hosts: one network namespace per rank, uplinks shaped, on one bridge ----------
def _sh(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)}: {done.stderr.strip()}")


@contextlib.contextmanager
def shaped_hosts(count: int, uplink_mbit: float) -> Iterator[tuple[str, list[str]]]:
    """(the bridge's address for the endpoint, one namespace per rank); removed on exit."""
    pid = os.getpid()
    net, bridge, made = f"10.{200 + pid % 50}", f"wprb{pid}"[:15], []
    try:
        _sh("ip", "link", "add", bridge, "type", "bridge")
        _sh("ip", "addr", "add", f"{net}.0.1/16", "dev", bridge)
        _sh("ip", "link", "set", bridge, "up")
        for i in range(count):
            ns, here, there = f"wpr-{pid}-{i}", f"wpr{i}a{pid}"[:15], f"wpr{i}b{pid}"[:15]
            _sh("ip", "netns", "add", ns)
            made.append(ns)
            _sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
            _sh("ip", "link", "set", here, "master", bridge)
            _sh("ip", "link", "set", here, "up")
            _sh("ip", "link", "set", there, "netns", ns)
            burst = max(64 * 1024, int(uplink_mbit * 1e6 / 8 / 250))  # 4 ms of traffic
            for cmd in (
                ("ip", "addr", "add", f"{net}.{i + 1}.2/16", "dev", there),
                ("ip", "link", "set", there, "up"),
                ("ip", "link", "set", "lo", "up"),
                ("tc", "qdisc", "add", "dev", there, "root", "tbf", "rate",
                 f"{uplink_mbit}mbit", "burst", str(burst), "latency", "100ms"),
            ):  # fmt: skip
                _sh("ip", "netns", "exec", ns, *cmd)
        yield f"{net}.0.1", made
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


def enter_namespace(ns: str) -> None:
    """Move this (single-threaded, just forked) process into network namespace ``ns``."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
    finally:
        os.close(fd)


def rank_main(
    url: str, endpoint: str, rank: int, ranks: int, barrier: Barrier, out: Any, ns: str | None
) -> None:
    if ns is not None:
        enter_namespace(ns)
    store = open_store(url, endpoint_url=endpoint)
    pub = ShardedPublisher(
        store, CONFIG, rank=rank, ranks=ranks, run_id=f"bench-r{ranks}", poll_s=0.02
    )
    barrier.wait()
    start = time.monotonic()
    pub.publish(_SNAPSHOT, 1)
    out.put((rank, start, time.monotonic()))


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def machine_busy_ticks() -> int:
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in cpu]
    return sum(values) - values[3] - values[4]  # all but idle and iowait


def endpoint_pid() -> int:
    """The moto server local_moto started: our child running ThreadedMotoServer."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if ppid == os.getpid() and b"ThreadedMotoServer" in cmdline:
            return int(stat.parent.name)
    raise RuntimeError("the moto server process was not found")


def one_run(endpoint: str, moto_pid: int, ranks: int, hosts: list[str] | None) -> Run:
    url = f"s3://{make_bucket(endpoint)}/bench"
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(ranks + 1), ctx.Queue()
    procs = [
        ctx.Process(
            target=rank_main,
            args=(url, endpoint, r, ranks, barrier, out, None if hosts is None else hosts[r]),
        )
        for r in range(ranks)
    ]
    before = os.times()
    for p in procs:
        p.start()
    barrier.wait()  # every rank has its store client: the clock starts now
    moto0, busy0, t0 = cpu_ticks(moto_pid), machine_busy_ticks(), time.monotonic()
    times = [out.get(timeout=1800) for _ in procs]
    wall_s = time.monotonic() - t0
    moto1, busy1 = cpu_ticks(moto_pid), machine_busy_ticks()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a publishing process exited with {p.exitcode}")
    after = os.times()
    ranks_cpu_s = sum(
        getattr(after, f) - getattr(before, f) for f in ("children_user", "children_system")
    )
    total_bytes = sum(a.nbytes for a in _SNAPSHOT.values())
    span_s = max(end for _, _, end in times) - min(start for _, start, _ in times)
    return Run(
        ranks=ranks,
        wall_s=span_s,
        mb_s=total_bytes / span_s / 1e6,
        rank_s=[round(end - start, 2) for _, start, end in sorted(times)],
        endpoint_cores=(moto1 - moto0) / TICKS_S / wall_s,
        publisher_cores=ranks_cpu_s / wall_s,  # includes each rank's set-up before the barrier
        machine_busy_cores=(busy1 - busy0) / TICKS_S / wall_s,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="snapshot size")
    ap.add_argument("--ranks", default="1,2,4", help="publishing process counts")
    ap.add_argument("--repeat", type=int, default=2, help="runs per rank count (best kept)")
    ap.add_argument(
        "--uplink-mbit", type=float, default=None, help="each rank on its own shaped host (root)"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    counts = [int(r) for r in args.ranks.split(",")]
    _SNAPSHOT.update(make_snapshot(args.gib))
    total = sum(a.nbytes for a in _SNAPSHOT.values())
    best: list[Run] = []
    with contextlib.ExitStack() as stack:
        address, hosts = "127.0.0.1", None
        if args.uplink_mbit is not None:
            address, hosts = stack.enter_context(shaped_hosts(max(counts), args.uplink_mbit))
        endpoint = stack.enter_context(local_moto(ip_address=address))
        moto_pid = endpoint_pid()
        for ranks in counts:
            runs = [one_run(endpoint, moto_pid, ranks, hosts) for _ in range(args.repeat)]
            best.append(min(runs, key=lambda r: r.wall_s))
    base = best[0].mb_s if best and best[0].ranks == 1 else None
    report: dict[str, Any] = {
        "snapshot_bytes": total,
        "tensors": len(_SNAPSHOT),
        "cores": os.cpu_count(),
        "endpoint": "moto_server, own process",
        "uplink_mbit_per_rank": args.uplink_mbit,
        "load_average": os.getloadavg()[0],
        "runs": [{**asdict(r), "scaling": None if base is None else r.mb_s / base} for r in best],
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    uplink = "loopback" if args.uplink_mbit is None else f"{args.uplink_mbit:g} Mbit/s shaped"
    print(
        f"snapshot: {total / 2**30:.2f} GiB of random bf16 in {len(_SNAPSHOT)} tensors; "
        f"{report['endpoint']}; {report['cores']} cores; best of {args.repeat}; "
        f"each rank's uplink: {uplink}"
    )
    print(f"{'ranks':>5} {'MB/s':>7} {'scaling':>8} {'of R':>6} {'endpoint cores':>15} "
          f"{'ranks cores':>12} {'busy cores':>11}  per-rank s")  # fmt: skip
    for r in best:
        scale = r.mb_s / base if base else float("nan")
        print(
            f"{r.ranks:>5} {r.mb_s:>7.0f} {scale:>7.2f}x {scale / r.ranks:>6.2f} "
            f"{r.endpoint_cores:>15.2f} {r.publisher_cores:>12.2f} {r.machine_busy_cores:>11.2f}  "
            f"{r.rank_s}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
