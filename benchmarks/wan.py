"""Pull over an emulated WAN link, next to the link's own ceiling and s5cmd on the same link.

    .venv/bin/python benchmarks/wan.py [--mbit 200] [--rtt-ms 40] [--mib 256] [--density 1]
                                       [--repeat 2] [--concurrency 16] [--weights llama]

Root and iproute2 only (Linux network namespaces). The benchmark builds its link and
removes it on exit, Ctrl-C included:

    root namespace: "the region"                        namespace wanrl-wan-<pid>: "a rollout host"
    moto S3 on 127.0.0.1 <- delay line on 10.211.N.1 ==veth== 10.211.N.2: wanrl-s3 pull, s5cmd,
                                                               a plain TCP reader
                              tbf --mbit on both ends of the veth

Rows: the link's ceiling (one plain TCP stream, and --concurrency streams, moving the
snapshot's raw bytes straight across the veth), full pulls by wanrl-s3 (every tensor verified,
the file written) of the same snapshot published twice, its whole tensors coded in byte planes
(``full_coding="planes"``, the default) and stored raw (``"raw"``), s5cmd copying the planes
version's payload objects from the same server over the same link, and a delta pull
(``--have`` the full version; what a worker pays per step).

--weights random (default) publishes random bf16, which no coder shrinks; --weights llama a
LLaMA-like policy of about --mib MiB with per-tensor scales (wanrl_s3.testing's
random_bf16_state, as benchmarks/full_codec.py), which the planes coding stores in ~0.67x.

This kernel has no netem qdisc (its tc knows tbf, htb and pfifo), so the round trip comes
from a user-space delay line that holds every chunk for half of --rtt-ms in each direction.
Every request pays the round trip before its first byte, but TCP's windows see the short hop
to the delay line, so window limits at a large bandwidth-delay product are not reproduced;
the rate is the kernel's tbf.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from transfer import make_snapshot  # benchmarks/ is on sys.path[0]

from wanrl_s3 import PublishConfig, Publisher, SafetensorsFile, open_store
from wanrl_s3.testing import (
    dims_for_params,
    llama_like_layout,
    local_moto,
    make_bucket,
    nudge_state,
    random_bf16_state,
)

PREFIX = "wan"  # the planes-coded full version and the delta after it
RAW_PREFIX = "wan-raw"  # the same full version, published with full_coding="raw"
WEIGHTS = ("random", "llama")
CHUNK = 1 << 16

# Run inside the namespace: connect ``streams`` times, read until EOF, print the seconds.
_READER = """
import socket, sys, threading, time
host, port, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read():
    with socket.create_connection((host, port)) as s:
        while s.recv(1 << 20):
            pass
threads = [threading.Thread(target=read) for _ in range(streams)]
start = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
print(time.perf_counter() - start)
"""


@dataclass(frozen=True)
class Link:
    namespace: str
    host_ip: str  # our end of the veth pair, in the root namespace
    far_ip: str  # the rollout host's end, inside ``namespace``
    here_dev: str = ""  # the veth ends' names (ours, theirs): set_rate reshapes them
    far_dev: str = ""

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the namespace; raise with its stderr if it fails."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.namespace, *argv], capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(f"{argv[0]} failed in {self.namespace}: {done.stderr.strip()}")
        return done


def _sh(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)}: {done.stderr.strip()}")


@contextlib.contextmanager
def shaped_link(rate_mbit: float | None) -> Iterator[Link]:
    """A namespace joined to this one by a veth pair with a tbf of ``rate_mbit`` on each end
    (None: no tbf)."""
    pid = os.getpid()
    ns, here, there = f"wanrl-wan-{pid}", f"wrh{pid}", f"wrf{pid}"
    subnet = f"10.211.{pid % 250 + 1}"
    link = Link(ns, f"{subnet}.1", f"{subnet}.2", here, there)
    try:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
        _sh("ip", "link", "set", there, "netns", ns)
        _sh("ip", "addr", "add", f"{link.host_ip}/30", "dev", here)
        _sh("ip", "link", "set", here, "up")
        link.run("ip", "addr", "add", f"{link.far_ip}/30", "dev", there)
        link.run("ip", "link", "set", there, "up")
        link.run("ip", "link", "set", "lo", "up")
        set_rate(link, rate_mbit)
        yield link
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # takes the pair along
        subprocess.run(["ip", "link", "del", here], capture_output=True)


def set_rate(link: Link, rate_mbit: float | None) -> None:
    """Shape both ends of ``link`` to ``rate_mbit`` with tbf; None takes the shaping off
    (the veth then runs as fast as the machine moves packets)."""
    if rate_mbit is None:
        subprocess.run(["tc", "qdisc", "del", "dev", link.here_dev, "root"], capture_output=True)
        subprocess.run(["ip", "netns", "exec", link.namespace, "tc", "qdisc", "del", "dev",
                        link.far_dev, "root"], capture_output=True)  # fmt: skip
        return
    burst_bytes = max(32 * 1024, int(rate_mbit * 1e6 / 8 / 250))  # 4 ms of traffic
    tbf = ["tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst_bytes), "latency", "50ms"]
    _sh("tc", "qdisc", "replace", "dev", link.here_dev, "root", *tbf)
    link.run("tc", "qdisc", "replace", "dev", link.far_dev, "root", *tbf)


class DelayLine:
    """A TCP proxy from ``listen_ip`` to ``target_ip``:``target`` adding ``one_way_s`` each way.

    Unlike a proxy that sleeps before forwarding each chunk (which caps throughput at
    chunk / delay), each direction has a reader that stamps chunks with their release
    time and a writer that sends them when it comes: a round trip, not a rate.
    """

    def __init__(
        self, listen_ip: str, target: int, one_way_s: float, target_ip: str = "127.0.0.1"
    ) -> None:
        self.target, self.one_way_s, self.target_ip = target, one_way_s, target_ip
        self._server = socket.create_server((listen_ip, 0))
        self.endpoint = f"http://{listen_ip}:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.target_ip, self.target))
            for src, dst in ((client, upstream), (upstream, client)):
                line: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
                threading.Thread(target=self._read, args=(src, line), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, line), daemon=True).start()

    def _read(self, src: socket.socket, line: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        chunk = b""
        with contextlib.suppress(OSError):
            while chunk := src.recv(CHUNK):
                line.put((time.monotonic() + self.one_way_s, chunk))
        line.put((time.monotonic() + self.one_way_s, b""))  # end of stream, delayed too

    def _write(self, dst: socket.socket, line: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        with contextlib.suppress(OSError):
            while True:
                release_s, chunk = line.get()
                time.sleep(max(0.0, release_s - time.monotonic()))
                if not chunk:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(chunk)


def ceiling_s(link: Link, nbytes: int, streams: int) -> float:
    """Seconds to move ``nbytes`` (split over ``streams`` connections) straight across the link."""
    server = socket.create_server((link.host_ip, 0))
    each = -(-nbytes // streams)
    block = memoryview(bytes(1 << 20))

    def send(conn: socket.socket) -> None:
        with conn:
            left = each
            while left > 0:
                left -= conn.send(block[: min(left, block.nbytes)])

    def serve() -> None:
        for _ in range(streams):
            conn, _ = server.accept()
            threading.Thread(target=send, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    port = str(server.getsockname()[1])
    try:
        argv = (sys.executable, "-c", _READER, link.host_ip, port, str(streams))
        return float(link.run(*argv).stdout)
    finally:
        server.close()


def snapshot_state(weights: str, mib: float, work: Path) -> dict[str, np.ndarray]:
    """The full version's tensors, about ``mib`` MiB: random bf16 (no coder shrinks it) or
    LLaMA-like weights with per-tensor scales (what a policy's bytes look like)."""
    if weights == "llama":
        return random_bf16_state(llama_like_layout(dims_for_params(int(mib * 2**20 / 2))))
    src = work / "v1.src.safetensors"
    make_snapshot(src, mib / 1024)
    return dict(SafetensorsFile(src).items())


def publisher(endpoint: str, prefix: str, **config: object) -> Publisher:
    store = open_store(f"s3://bench/{prefix}", endpoint_url=endpoint)
    return Publisher(store, PublishConfig(**config))  # type: ignore[arg-type]


def publish_full(endpoint: str, state: Mapping[str, np.ndarray], prefix: str, coding: str) -> int:
    """``state`` as version 1 under ``prefix``, whole tensors coded ``coding``; stored bytes."""
    result = publisher(endpoint, prefix, full_coding=coding).publish(state, 1)
    if result.kind != "full":
        raise SystemExit(f"expected a full version under {prefix}, got {result.kind}")
    return int(result.stored_bytes)


@dataclass(frozen=True)
class Sizes:
    raw_bytes: int  # the full version stored raw (RAW_PREFIX)
    planes_bytes: int  # the same version, whole tensors coded in byte planes (PREFIX)
    delta_bytes: int  # version 2, a delta at --density (PREFIX)


def publish_versions(endpoint: str, state: dict[str, np.ndarray], density: float) -> Sizes:
    """v1 in planes and v2 a delta at ``density`` under PREFIX; v1 again, raw, under RAW_PREFIX."""
    make_bucket(endpoint, "bench")
    coded = publisher(endpoint, PREFIX, delta="always")
    full, delta = coded.publish(state, 1), coded.publish(nudge_state(state, density, seed=1), 2)
    if (full.kind, delta.kind) != ("full", "delta"):
        raise SystemExit(f"expected a full and a delta version, got {full.kind}, {delta.kind}")
    raw = publish_full(endpoint, state, RAW_PREFIX, "raw")
    return Sizes(raw, int(full.stored_bytes), int(delta.stored_bytes))


@dataclass(frozen=True)
class Pull:
    seconds: float  # the pull's own (Python start-up excluded)
    download_s: float  # until the last byte arrived
    verify_s: float  # checks and decoding left after that
    cpu_s: float  # user + system CPU of the pulling process, Python start-up included


def pull(link: Link | None, endpoint: str, prefix: str, out: Path, *extra: str) -> Pull:
    """``wanrl-s3 pull`` of version 1 (2 with ``--have``) inside the link's namespace, or in
    this one when ``link`` is None; the file at ``out`` is removed unless --have needs it."""
    version = "2" if "--have" in extra else "1"
    argv = [sys.executable, "-m", "wanrl_s3.cli", "pull", "--store", f"s3://bench/{prefix}"]
    argv += ["--endpoint-url", endpoint, "--version", version, "--out", str(out), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if link is not None:
        done = link.run(*argv, *extra)
    else:
        done = subprocess.run([*argv, *extra], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"pull failed: {done.stderr.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads(done.stdout)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Pull(summary["seconds"], summary["download_s"], summary["verify_s"], cpu_s)


def best_pulls(runs: int, pull_once: Callable[[str, int], Pull]) -> dict[str, Pull]:
    """The fastest of ``runs`` pulls of PREFIX (planes) and RAW_PREFIX, taken in turns so
    both see the same spells of load; ``pull_once(prefix, i)`` is the i-th pull."""
    found: dict[str, list[Pull]] = {PREFIX: [], RAW_PREFIX: []}
    for i in range(runs):
        for prefix, pulls in found.items():
            pulls.append(pull_once(prefix, i))
    return {prefix: min(pulls, key=lambda p: p.seconds) for prefix, pulls in found.items()}


def s5cmd_s(link: Link, endpoint: str, version: int, out: Path) -> float:
    """s5cmd copying version ``version``'s objects (payload and manifest) inside the namespace."""
    s5cmd = shutil.which("s5cmd") or str(Path(sys.executable).parent / "s5cmd")
    remote = f"s3://bench/{PREFIX}/v/{version:012d}/*"  # a version's folder, docs/format.md
    start = time.perf_counter()
    link.run(s5cmd, "--endpoint-url", endpoint, "cp", remote, f"{out}/")
    seconds = time.perf_counter() - start
    shutil.rmtree(out)
    return seconds


@dataclass(frozen=True)
class Row:
    label: str
    seconds: float
    nbytes: int


def measure(args: argparse.Namespace, link: Link, far: str, sizes: Sizes, work: Path) -> list[Row]:
    """Every row, best of ``args.repeat`` each; ``far`` is the S3 endpoint across the link."""
    conc = ("--concurrency", str(args.concurrency))
    runs = range(args.repeat)
    rows = [
        Row(f"TCP, {n} stream{'s' * (n > 1)} (link ceiling)",
            min(ceiling_s(link, sizes.raw_bytes, n) for _ in runs), sizes.raw_bytes)
        for n in (1, args.concurrency)
    ]  # fmt: skip
    have = work / "have.safetensors"

    def full_pull(prefix: str, i: int) -> Pull:
        out = work / f"{prefix}.safetensors"
        done = pull(link, far, prefix, out, *conc)
        if prefix == PREFIX and i == 0:
            out.rename(have)  # the delta pull's --have
        else:
            out.unlink()
        return done

    best = best_pulls(args.repeat, full_pull)
    rows.append(Row("wanrl-s3 pull v1 (full, planes)", best[PREFIX].seconds, sizes.planes_bytes))
    rows.append(Row("wanrl-s3 pull v1 (full, raw)", best[RAW_PREFIX].seconds, sizes.raw_bytes))
    s5_s = min(s5cmd_s(link, far, 1, work / f"s5.{i}") for i in runs)
    rows.append(Row("s5cmd cp, the planes objects", s5_s, sizes.planes_bytes))
    delta_s = min(
        pull(link, far, PREFIX, work / "v2.safetensors", "--have", str(have), *conc).seconds
        for _ in runs
    )
    rows.append(Row(f"wanrl-s3 pull v2 --have v1 ({args.density:g}% delta)", delta_s,
                    sizes.delta_bytes))  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbit", type=float, default=200.0, help="link rate each way (default 200)")
    ap.add_argument("--rtt-ms", type=float, default=40.0, help="round trip (default 40)")
    ap.add_argument("--mib", type=float, default=256.0, help="snapshot size (default 256 MiB)")
    ap.add_argument("--density", type=float, default=1.0, help="delta density %% (default 1)")
    common_options(ap, weights="random")
    args = ap.parse_args()
    require_root("benchmarks/wan.py")
    work = Path(tempfile.mkdtemp(prefix="wanrl-wan-"))
    try:
        with local_moto() as endpoint, shaped_link(args.mbit) as link:
            state = snapshot_state(args.weights, args.mib, work)
            sizes = publish_versions(endpoint, state, args.density / 100)
            del state
            line = DelayLine(link.host_ip, int(endpoint.rsplit(":", 1)[1]), args.rtt_ms / 2000)
            try:
                rows = measure(args, link, line.endpoint, sizes, work)
            finally:
                line.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(args, rows)


def common_options(ap: argparse.ArgumentParser, *, weights: str) -> None:
    """--weights, --repeat and --concurrency, shared with benchmarks/full_pull.py."""
    ap.add_argument("--weights", choices=WEIGHTS, default=weights, help=f"default {weights}")
    ap.add_argument("--repeat", type=int, default=2, help="best of this many runs (default 2)")
    ap.add_argument("--concurrency", type=int, default=16, help="parallel GETs (default 16)")


def require_root(what: str) -> None:
    if os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")):
        raise SystemExit(f"{what} needs root and iproute2 (ip, tc)")


def describe(weights: str) -> str:
    return "random bf16" if weights == "random" else "LLaMA-like bf16 (per-tensor scales)"


def report(args: argparse.Namespace, rows: list[Row]) -> None:
    print(
        f"link: {args.mbit:g} Mbit/s each way (tbf), {args.rtt_ms:g} ms round trip (delay line), "
        f"best of {args.repeat}; snapshot {args.mib:g} MiB of {describe(args.weights)}, moto on "
        f"the far side; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print(f"{'':<44} {'MB':>8} {'seconds':>8} {'Mbit/s':>7} {'of link':>8}")
    for row in rows:
        mbit = row.nbytes * 8 / row.seconds / 1e6
        print(
            f"{row.label:<44} {row.nbytes / 1e6:>8.1f} {row.seconds:>8.2f} {mbit:>7.0f} "
            f"{mbit / args.mbit:>7.0%}"
        )
    planes, raw, delta = rows[2], rows[3], rows[-1]
    print(
        f"full pull coded in planes: {planes.nbytes / raw.nbytes:.3f}x the bytes, "
        f"{planes.seconds / raw.seconds:.3f}x the raw pull's time"
    )
    round_trips = delta.seconds / (args.rtt_ms / 1e3)
    print(
        f"a worker's update: {delta.seconds:.2f} s by delta against {planes.seconds:.2f} s for "
        f"the full version ({planes.seconds / delta.seconds:.1f}x), {round_trips:.1f} round trips"
    )


if __name__ == "__main__":
    main()
