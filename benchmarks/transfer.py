"""Publish and pull throughput against a moto S3 server, next to s5cmd moving the same bytes.

    .venv/bin/python benchmarks/transfer.py [--gib 1] [--repeat 3]

Everything talks to one moto server (its own process, 127.0.0.1) in the same run.
wanrl-s3 publishes a safetensors snapshot of random bf16 tensors (nothing
compresses) in 64 MiB payload objects and pulls it back into a file with every
tensor hash-verified. s5cmd moves the same bytes twice: as the one file, and cut
into the same 64 MiB objects (moto copies a whole object for every ranged GET and
for every multipart completion, so object size matters on this server; the second
layout is the like-for-like comparison). Best of ``--repeat`` runs each.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

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
from wanrl_s3.testing import local_moto, make_bucket

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

    return name, best_s(all_pieces, repeat)


def best_s(fn: Callable[[int], None], repeat: int) -> float:
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    s5cmd = shutil.which("s5cmd") or str(Path(sys.executable).parent / "s5cmd")
    work = Path(tempfile.mkdtemp(prefix="wanrl-bench-"))
    try:
        src = work / "snapshot.safetensors"
        nbytes = make_snapshot(src, args.gib)
        split(src, work / "pieces", OBJECT_BYTES)
        tensors = dict(SafetensorsFile(src).items())
        with local_moto() as endpoint:
            bucket = make_bucket(endpoint, "bench")
            store = open_store(f"s3://{bucket}/wanrl", endpoint_url=endpoint)
            cfg = PublishConfig(delta="never", concurrency=args.concurrency)

            def s5(*argv: str) -> None:
                subprocess.run(
                    [s5cmd, "--endpoint-url", endpoint, *argv],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )

            def ours_pull(i: int) -> None:
                with Subscriber(store, concurrency=args.concurrency) as sub:
                    pull_to_file(sub, work / "ours.safetensors", i + 1)

            def s5_pull(remote: str, local: Path) -> None:
                s5("cp", remote, str(local))
                shutil.rmtree(local) if local.is_dir() else local.unlink()

            rows = {
                "wanrl-s3": (
                    best_s(lambda i: Publisher(store, cfg).publish(tensors, i + 1), args.repeat),
                    best_s(ours_pull, args.repeat),
                ),
                "s5cmd, one file": (
                    best_s(
                        lambda i: s5("cp", str(src), f"s3://{bucket}/one/{i}/s.bin"), args.repeat
                    ),
                    best_s(
                        lambda i: s5_pull(f"s3://{bucket}/one/{i}/s.bin", work / "one.bin"),
                        args.repeat,
                    ),
                ),
                f"s5cmd, {OBJECT_BYTES // MiB} MiB objects": (
                    best_s(
                        lambda i: s5("cp", f"{work / 'pieces'}/*", f"s3://{bucket}/obj/{i}/"),
                        args.repeat,
                    ),
                    best_s(
                        lambda i: s5_pull(f"s3://{bucket}/obj/{i}/*", work / "obj"), args.repeat
                    ),
                ),
            }
        crc_name, crc_s = checksum_s(src, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mb = nbytes / 1e6
    print(
        f"snapshot: {nbytes / 2**30:.2f} GiB of random bf16, moto_server on 127.0.0.1, "
        f"best of {args.repeat}"
    )
    print(f"{'':<24} {'publish MB/s':>12} {'pull MB/s':>10}")
    for name, (up, down) in rows.items():
        print(f"{name:<24} {mb / up:>12.0f} {mb / down:>10.0f}")
    ours_up, ours_down = rows["wanrl-s3"]
    fastest_up = min(up for name, (up, _) in rows.items() if name != "wanrl-s3")
    fastest_down = min(down for name, (_, down) in rows.items() if name != "wanrl-s3")
    print(
        f"wanrl-s3 / fastest s5cmd: publish {fastest_up / ours_up:.2f}x, "
        f"pull {fastest_down / ours_down:.2f}x"
    )
    print(
        f"upload checksums ({crc_name} of every object): {crc_s:.2f} s, "
        f"{100 * crc_s / ours_up:.1f}% of wanrl-s3's publish time"
    )


if __name__ == "__main__":
    main()
