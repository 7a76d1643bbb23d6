"""Publish and pull throughput against SeaweedFS, next to s5cmd moving the same bytes.

    .venv/bin/python benchmarks/transfer.py [--gib 1] [--repeat 3] [--server seaweedfs|moto]
                                            [--pin]

Everything talks to one S3 server on 127.0.0.1 (SeaweedFS, a real S3 server; moto
with ``--server moto``, the server of the older figures). wanrl-s3 publishes a
safetensors snapshot of random bf16 tensors (nothing compresses) in 64 MiB
payload objects and pulls it back into a file with every tensor hash-verified.
s5cmd moves the same bytes twice: as the one file, and cut into the same 64 MiB
objects (the like-for-like layout: moto copies a whole object for every ranged GET
and every multipart completion, so object size matters there). The three take
turns, ``--repeat`` rounds; the table gives each one's median MB/s with the
lowest and highest round, and the ratio to the faster s5cmd layout in the same
round (median, lowest-highest): on a loaded machine the absolute figures swing,
the ratios within a round much less.

``--pin`` keeps the server on the last CPU and this process (its threads, and
s5cmd, which inherits it) on the first: whether a gap is the two sides
contending for the same cores or the client's own work.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import blake3
import ml_dtypes
import numpy as np

from wanrl_s3 import (
    PublishConfig,
    Publisher,
    SafetensorsFile,
    Subscriber,
    open_store,
    pull_to_file,
    write_file,
)
from wanrl_s3.testing import local_moto, local_s3, make_bucket

MiB = 2**20
OBJECT_BYTES = PublishConfig().object_bytes


def make_snapshot(path: Path, gib: float) -> int:
    """Random bf16 tensors of transformer-like sizes, ``gib`` GiB in all."""
    rng = np.random.default_rng(0)
    total = int(gib * 2**30)
    tensors, size, i = {}, 0, 0
    while size < total:
        n = min(32 * MiB, (total - size) // 2)  # 64 MiB tensors, like an 8B model's MLP weights
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = rng.integers(
            0, 2**16, n, dtype=np.uint16
        ).view(ml_dtypes.bfloat16)
        size += 2 * n
        i += 1
    write_file(path, tensors)
    return size


def split(src: Path, out: Path, piece_bytes: int) -> None:
    out.mkdir()
    with open(src, "rb") as f:
        i = 0
        while chunk := f.read(piece_bytes):
            (out / f"{i:06d}.bin").write_bytes(chunk)
            i += 1


def checksum_s(src: Path, repeat: int) -> tuple[str, float]:
    """The CPU an upload's checksums cost: the CRC of every 64 MiB object of ``src``.

    The same library call the s3 store makes per PUT and part (CRC32C with
    google-crc32c, else zlib's CRC32), timed alone because it hides in the
    run-to-run spread of a publish.
    """
    try:
        import google_crc32c

        name, crc = "CRC32C", google_crc32c.value
    except ImportError:
        name, crc = "CRC32", zlib.crc32
    pieces = [p.read_bytes() for p in sorted((src.parent / "pieces").iterdir())]

    def all_pieces(_: int) -> None:
        for piece in pieces:
            crc(piece)

    return name, min(timed_s(lambda: all_pieces(0)) for _ in range(repeat))


def blake3_cpu_s(tensors: dict[str, np.ndarray], repeat: int) -> float:
    """The CPU seconds of the BLAKE3 of every tensor: what a publish hashes for its
    manifest and a pull verifies, and s5cmd does not do. The same library call
    (``blake3``, threaded as wanrl-s3 calls it), timed alone, the least of ``repeat``."""

    def hash_all() -> None:
        for arr in tensors.values():
            blake3.blake3(arr.view(np.uint8).reshape(-1), max_threads=blake3.blake3.AUTO)

    runs = []
    for _ in range(repeat):
        start = cpu_s()
        hash_all()
        runs.append(cpu_s() - start)
    return min(runs)


def timed_s(fn: Callable[[], None]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cpu_s() -> float:
    """CPU seconds (user + sys) of this process and its finished children (s5cmd)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def server_cpu_s() -> float:
    """CPU seconds of this process's running children: the S3 server (weed or moto)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == os.getpid():  # the parent's pid
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    return total


def pin_apart() -> None:
    """The server's threads on the last CPU, this process's on the first (Linux)."""
    server_cpu, client_cpu = {max(os.sched_getaffinity(0))}, {min(os.sched_getaffinity(0))}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            for task in (stat.parent / "task").iterdir():
                os.sched_setaffinity(int(task.name), server_cpu)
        except (OSError, ValueError):  # gone meanwhile
            continue
    for task in Path("/proc/self/task").iterdir():
        os.sched_setaffinity(int(task.name), client_cpu)


def timed(fn: Callable[[], None]) -> tuple[float, float, float]:
    """(wall seconds, client CPU seconds, server CPU seconds) of ``fn``."""
    cpu, server = cpu_s(), server_cpu_s()
    wall = timed_s(fn)
    return wall, cpu_s() - cpu, server_cpu_s() - server


def spread(values: list[float], digits: int = 2) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--server", choices=["seaweedfs", "moto"], default="seaweedfs")
    ap.add_argument("--pin", action="store_true", help="server and client on separate CPUs")
    args = ap.parse_args()
    s5cmd = shutil.which("s5cmd") or str(Path(sys.executable).parent / "s5cmd")
    work = Path(tempfile.mkdtemp(prefix="wanrl-bench-"))
    names = ["wanrl-s3", "s5cmd, one file", f"s5cmd, {OBJECT_BYTES // MiB} MiB objects"]
    up_s: dict[str, list[float]] = {n: [] for n in names}
    down_s: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[tuple[float, ...]]] = {n: [] for n in names}  # client up, down, server
    load = [os.getloadavg()[0]]
    try:
        src = work / "snapshot.safetensors"
        nbytes = make_snapshot(src, args.gib)
        split(src, work / "pieces", OBJECT_BYTES)
        tensors = dict(SafetensorsFile(src).items())
        with local_moto() if args.server == "moto" else local_s3() as endpoint:
            if args.pin:
                pin_apart()
            bucket = make_bucket(endpoint, "bench")
            store = open_store(f"s3://{bucket}/wanrl", endpoint_url=endpoint)
            cfg = PublishConfig(delta="never", concurrency=args.concurrency)

            def s5(*argv: str) -> None:
                subprocess.run(
                    [s5cmd, "--endpoint-url", endpoint, *argv],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )

            Timing = tuple[tuple[float, float, float], ...]  # (wall, CPU, server CPU): up, down

            def ours(version: int) -> Timing:
                up = timed(lambda: Publisher(store, cfg).publish(tensors, version))
                with Subscriber(store, concurrency=args.concurrency) as sub:
                    down = timed(lambda: pull_to_file(sub, work / "ours.safetensors", version))
                (work / "ours.safetensors").unlink()
                store.delete([o.key for o in store.list()])  # the server's disk: one at a time
                return up, down

            def s5_both(local: str, remote: str, back: Path) -> Timing:
                """Up, back (a prefix's objects when ``remote`` ends with /*), removed."""
                up = timed(lambda: s5("cp", local, remote.removesuffix("*")))
                down = timed(lambda: s5("cp", remote, str(back)))
                shutil.rmtree(back) if back.is_dir() else back.unlink()
                s5("rm", remote)
                return up, down

            runs: dict[str, Callable[[int], Timing]] = {
                names[0]: lambda i: ours(i + 1),
                names[1]: lambda i: s5_both(
                    str(src), f"s3://{bucket}/one/{i}/s.bin", work / "one.bin"
                ),
                names[2]: lambda i: s5_both(
                    f"{work / 'pieces'}/*", f"s3://{bucket}/obj/{i}/*", work / "obj"
                ),
            }
            for i in range(args.repeat):
                for name in names[i % 3 :] + names[: i % 3]:  # none always goes first
                    (up, up_cpu, up_srv), (down, down_cpu, down_srv) = runs[name](i)
                    up_s[name].append(up)
                    down_s[name].append(down)
                    cpu[name].append((up_cpu, down_cpu, up_srv, down_srv))
            load.append(os.getloadavg()[0])
        crc_name, crc_s = checksum_s(src, args.repeat)
        hash_cpu_s = blake3_cpu_s(tensors, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mb = nbytes / 1e6
    print(
        f"snapshot: {nbytes / 2**30:.2f} GiB of random bf16, {args.server} on 127.0.0.1, "
        f"{args.repeat} rounds; load average {load[0]:.1f} -> {load[-1]:.1f} "
        f"on {os.cpu_count()} cores" + (", server and client pinned apart" if args.pin else "")
    )
    gb = nbytes / 1e9
    print("| | publish MB/s, median (min-max) | pull MB/s | CPU s/GB, publish: client, server "
          "| pull: client, server |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in names:
        up = [mb / t for t in up_s[name]]
        down = [mb / t for t in down_s[name]]
        c = [statistics.median(row[k] for row in cpu[name]) / gb for k in range(4)]
        print(f"| {name} | {spread(up, 0)} | {spread(down, 0)} | {c[0]:.2f}, {c[2]:.2f} "
              f"| {c[1]:.2f}, {c[3]:.2f} |")  # fmt: skip
    best_up = [min(up_s[n][i] for n in names[1:]) for i in range(args.repeat)]
    best_down = [min(down_s[n][i] for n in names[1:]) for i in range(args.repeat)]
    print(
        "| wanrl-s3 / faster s5cmd, per round | "
        f"{spread([b / t for b, t in zip(best_up, up_s[names[0]], strict=True)])} | "
        f"{spread([b / t for b, t in zip(best_down, down_s[names[0]], strict=True)])} | | |"
    )
    ours_up_s = statistics.median(up_s[names[0]])
    print(
        f"upload checksums ({crc_name} of every object): {crc_s:.2f} s, "
        f"{100 * crc_s / ours_up_s:.1f}% of wanrl-s3's publish time"
    )
    hash_gb = hash_cpu_s / gb
    up_cpu, down_cpu = (statistics.median(row[k] for row in cpu[names[0]]) / gb for k in range(2))
    print(
        f"BLAKE3 of every tensor (publish hashes, pull verifies; s5cmd does neither): "
        f"{hash_gb:.2f} CPU s/GB; wanrl-s3's client CPU without it: "
        f"publish {up_cpu - hash_gb:.2f}, pull {down_cpu - hash_gb:.2f} s/GB"
    )


if __name__ == "__main__":
    main()
