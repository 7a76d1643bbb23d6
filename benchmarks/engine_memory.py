"""Peak resident memory of a rollout engine's install path against the snapshot's size.

    .venv/bin/python benchmarks/engine_memory.py [--gib 1] [--work DIR] [--json]

What the verl rollout engine does (integrations/verl ``RolloutSide`` and
``receive_weights``), with the public API and without verl: a ``Watcher``
prefetches each version; at a sync the engine installs the newest ready one and
copies every tensor to its device (here: reads every byte once, through
``Snapshot.items(release_pages=True)``, as the engine does; ``--keep-pages``: without
releasing them, for comparison). In memory the engine sets ``reuse_installed`` (the
next version decoded into the installed one's arrays); ``--no-reuse``: without it.
The child, as the engine, calls ``return_big_buffers()`` (``--keep-allocator``: not).
The child installs v1 (a keyframe), then v2 (a 1% delta, published once v1 is
installed), and exits. Two configurations: versions held in memory (no
``host_cache_dir``, the default), and staged as files in a directory on a local disk
(``host_cache_dir``).

Peaks as in benchmarks/memory.py (its ``measure``: ``ru_maxrss`` and sampled
anonymous and file-backed pages), against the same generated 1 GiB pair and a moto
server in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from memory import measure, store_for  # benchmarks/ is on sys.path[0]

from wanrl_s3 import (
    SafetensorsFile,
    Subscriber,
    WatchConfig,
    Watcher,
    open_store,
    return_big_buffers,
)
from wanrl_s3.testing import CREDENTIALS

CONFIGS = {"in memory": None, "host_cache_dir on disk": "cache"}


def child(url: str, endpoint: str, cache: str, marker: Path, flags: str) -> None:
    """The engine: install v1, say so (the parent publishes v2), install v2. ``flags``:
    release pages, reuse the installed arrays, return big buffers, as 0 or 1 each."""
    release, reuse, give_back = (f == "1" for f in flags)
    if give_back:
        return_big_buffers()
    sub = Subscriber(open_store(url, endpoint_url=endpoint))
    cached = None if cache == "-" else cache
    watch = WatchConfig(
        poll_interval_s=0.2, host_cache_dir=cached, reuse_installed=reuse and cached is None
    )
    watcher = Watcher(sub, watch).start()
    try:
        for version in (1, 2):
            while watcher.ready_version != version:
                watcher.wait_ready(600)
            taken: list = []
            watcher.install(sink=taken.append)
            for _, arr in taken[0].items(release_pages=release):  # the copy to the device
                np.bitwise_xor.reduce(arr.reshape(-1).view(np.uint8))
            watcher.done_with(taken[0])
            del taken
            marker.write_text(str(version))
    finally:
        watcher.stop()
        sub.close()


def publish_when(marker: Path, argv: list[str], env: dict[str, str]) -> None:
    """Publish v2 once the engine has installed v1 (so v2 comes as a delta onto it)."""
    while not marker.exists():
        time.sleep(0.05)
    subprocess.run(argv, check=True, env=env, capture_output=True)


def run(gib: float, work: Path, flags: str) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    memory_py = Path(__file__).with_name("memory.py")
    subprocess.run([sys.executable, str(memory_py), "--generate", "--gib", str(gib),
                    "--work", str(work)], check=True)  # fmt: skip
    v1, v2 = work / "v1.safetensors", work / "v2.safetensors"
    size = sum(a.nbytes for _, a in SafetensorsFile(v1).items())
    env = {**CREDENTIALS, **os.environ}
    rows = []
    for name, cache in CONFIGS.items():
        with store_for(gib, work) as (url, store_args):
            endpoint = store_args[store_args.index("--endpoint-url") + 1]
            publish = [sys.executable, "-m", "wanrl_s3.cli", "publish", *store_args]
            subprocess.run([*publish, str(v1), "--version", "1", "--delta", "never"],
                           check=True, env=env, capture_output=True)  # fmt: skip
            marker, stage = work / "marker", work / "stage"
            marker.unlink(missing_ok=True)
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir()
            v2_argv = [*publish, str(v2), "--version", "2"]
            publisher = threading.Thread(target=publish_when, args=(marker, v2_argv, env))
            publisher.start()
            argv = [sys.executable, __file__, "--child", url, endpoint,
                    str(stage) if cache else "-", str(marker), flags]  # fmt: skip
            rss, anon, file_backed, sampled, seconds = measure(argv, env, work)
            publisher.join()
        rows.append({"config": name, "snapshot_bytes": size, "peak_rss_bytes": rss,
                     "peak_anon_bytes": anon, "peak_file_bytes": file_backed,
                     "peak_sampled_rss_bytes": sampled, "ratio": round(rss / size, 3),
                     "seconds": round(seconds, 1)})  # fmt: skip
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--work", type=Path, default=Path("/tmp/wanrl-engine-memory"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep-pages", action="store_true",
                   help="copy through items() without release_pages (before)")  # fmt: skip
    p.add_argument("--no-reuse", action="store_true",
                   help="in memory without reuse_installed (before)")  # fmt: skip
    p.add_argument("--keep-allocator", action="store_true",
                   help="without return_big_buffers() (before)")  # fmt: skip
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        url, endpoint, cache, marker, flags = args.child
        child(url, endpoint, cache, Path(marker), flags)
        return
    if args.gib > 4:
        raise SystemExit("--gib above 4 is not supported: moto keeps every object in memory")
    on = (not args.keep_pages, not args.no_reuse, not args.keep_allocator)
    rows = run(args.gib, args.work, "".join(str(int(f)) for f in on))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    mib = 2**20
    print(f"{'configuration':<24} {'peak RSS':>9} {'anon MiB':>9} {'file MiB':>9} {'s':>6}")
    for r in rows:
        print(f"{r['config']:<24} {r['ratio']:>8.2f}x {r['peak_anon_bytes'] // mib:>9} "
              f"{r['peak_file_bytes'] // mib:>9} {r['seconds']:>6}")  # fmt: skip


if __name__ == "__main__":
    main()
