"""Disk held by ``wanrl-s3 worker --out-dir`` across versions, and its install time (issue 17).

    .venv/bin/python benchmarks/worker_disk.py [--gib 1] [--versions 4] [--pythonpath DIR] [--json]

v1 (a keyframe) and then v2..vN (each moves 1% of the last one's weights one ulp)
are published to a moto server (its own process) with ``wanrl-s3 publish``; one
worker follows them into an out-dir. Disk held = the snapshot files under the
out-dir that have a name, plus those the worker still maps there (an unlinked
file keeps its blocks while mapped), counted once per inode, allocated blocks.
After each install (and a 1 s settle) the figure at rest; the most at once is
sampled every 20 ms for the whole run. Install seconds are the worker's own
(its log line's "s write"). ``--pythonpath`` runs the CLI from another checkout
(a ``git archive``) for the before figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from wanrl_s3 import SafetensorsFile
from wanrl_s3.testing import CREDENTIALS, local_moto, make_bucket, worker_command

GiB = 2**30
SAMPLE_S = 0.02


@dataclass(frozen=True)
class Held:
    files: int
    bytes_on_disk: int


@dataclass(frozen=True)
class Result:
    snapshot_bytes: int
    at_rest: list[dict[str, float]]  # version, files, bytes_on_disk, install_s
    most: Held


def held(out: Path, pid: int) -> Held:
    """Snapshot files (not empty: a lock is) named under ``out`` or mapped there by ``pid``."""
    blocks: dict[int, int] = {}
    for path in out.rglob("*"):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if path.is_file() and st.st_size > 0:
            blocks[st.st_ino] = st.st_blocks * 512
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        maps = []
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(str(out)) and int(fields[4]) not in blocks:
            try:  # the mapped file itself, deleted or not (root may stat map_files)
                st = os.stat(f"/proc/{pid}/map_files/{fields[0]}")
                blocks[int(fields[4])] = st.st_blocks * 512
            except OSError:
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                blocks[int(fields[4])] = hi - lo
    return Held(len(blocks), sum(blocks.values()))


def make_chain(work: Path, gib: float, versions: int) -> list[Path]:
    files = [work / f"v{v}.safetensors" for v in range(1, versions + 1)]
    gen = [sys.executable, "-m", "wanrl_s3.testing", "make-policy"]
    if not files[0].exists():
        subprocess.run([*gen, str(files[0]), "--params", str(gib * GiB / 2)], check=True)
    for v in range(1, versions):
        if not files[v].exists():
            subprocess.run([*gen, str(files[v]), "--next-of", str(files[v - 1]),
                            "--fraction", "0.01", "--seed", str(v)], check=True)  # fmt: skip
    return files


def version_in(path: Path) -> int | None:
    try:
        return int(SafetensorsFile(path).metadata.get("wanrl_s3.version", "0"))
    except (OSError, ValueError):
        return None


def run(args: argparse.Namespace) -> Result:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    files = make_chain(work, args.gib, args.versions)
    out = work / "out"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    env = {**os.environ, **CREDENTIALS}
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    rows: list[dict[str, float]] = []
    most = Held(0, 0)
    with local_moto() as endpoint:
        url = f"s3://{make_bucket(endpoint)}/disk"
        store = ["--store", url, "--endpoint-url", endpoint]

        def publish(v: int) -> None:
            base = ["--delta", "never"] if v == 1 else ["--base", str(files[v - 2])]
            argv = [sys.executable, "-m", "wanrl_s3.cli", "publish", str(files[v - 1]), *store,
                    "--version", str(v), *base]  # fmt: skip
            subprocess.run(argv, env=env, cwd=work, check=True, capture_output=True)

        publish(1)
        log = (work / "worker.log").open("w+")
        worker = subprocess.Popen(worker_command(url, endpoint, str(out), "disk", 0.2),
                                  env=env, cwd=work, stderr=log)  # fmt: skip
        done = threading.Event()

        def sample() -> None:
            nonlocal most
            while not done.wait(SAMPLE_S):
                now = held(out, worker.pid)
                most = max(most, now, key=lambda h: h.bytes_on_disk)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for v in range(1, args.versions + 1):
                if v > 1:
                    publish(v)
                while version_in(out / "model.safetensors") != v:
                    time.sleep(0.05)
                time.sleep(1.0)
                rows.append({"version": v, **asdict(held(out, worker.pid))})
        finally:
            done.set()
            sampler.join()
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
        log.seek(0)
        install_s = [float(s) for s in re.findall(r"([0-9.]+) s write", log.read())]
    for row, seconds in zip(rows, install_s, strict=False):
        row["install_s"] = seconds
    return Result(files[0].stat().st_size, rows, most)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--versions", type=int, default=4)
    p.add_argument("--work", default="/tmp/wanrl-worker-disk")
    p.add_argument("--pythonpath", default=None, help="run the CLI from this checkout instead")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(asdict(result), indent=1))
        return
    snap = result.snapshot_bytes
    print(f"snapshot {snap / GiB:.2f} GiB; load average {os.getloadavg()[0]:.2f}")
    print("version  files  on disk GiB  x snapshot  install s")
    for r in result.at_rest:
        on_disk, install_s = r["bytes_on_disk"], r.get("install_s", float("nan"))
        print(f"{r['version']:7.0f}  {r['files']:5.0f}  {on_disk / GiB:11.2f}  "
              f"{on_disk / snap:10.2f}  {install_s:9.2f}")  # fmt: skip
    most = result.most
    print(
        f"most at once: {most.files} files, {most.bytes_on_disk / GiB:.2f} GiB "
        f"({most.bytes_on_disk / snap:.2f}x)"
    )


if __name__ == "__main__":
    main()
