"""The run behind docs/img/status-plot.png: six `wanrl-s3 worker` processes, two regions.

    .venv/bin/python examples/status_plot_fleet.py --out docs/img/status-plot.png

Publishes a 32 MiB bf16 policy to a file:// store, starts six workers (labelled
eu-west and us-east, polling every 0.5 to 4 s, one with an --on-install hook that
fails so that the plot marks a failure), waits until each installed v1, then
publishes seven sparse deltas and keyframes six seconds apart, stops the
workers and runs `wanrl-s3 status --plot`. About 70 s on two cores.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from wanrl_s3 import PublishConfig, Publisher, open_store
from wanrl_s3.testing import nudge_state

WORKERS = (  # id, region label, poll interval in seconds
    ("eu-a", "eu-west", 0.5),
    ("eu-b", "eu-west", 1.0),
    ("eu-c", "eu-west", 1.5),
    ("us-a", "us-east", 2.0),
    ("us-b", "us-east", 3.0),
    ("us-c", "us-east", 4.0),
)
FAILING_HOOK = "us-c"


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "wanrl_s3.cli", *args]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="status-plot.png", help="the PNG (default: %(default)s)")
    parser.add_argument("--versions", type=int, default=8, help="versions published (default 8)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wanrl-status-plot-") as tmp:
        root = Path(tmp)
        url = f"file://{root}/bucket/run1"
        rng = np.random.default_rng(0)
        state = {
            f"layers.{i}.w": rng.integers(0, 2**16, 4 << 20, np.uint16).view(ml_dtypes.bfloat16)
            for i in range(4)
        }
        pub = Publisher(open_store(url), PublishConfig(keyframe_every=4))
        pub.publish(state, 1)
        workers = []
        for worker_id, region, poll_s in WORKERS:
            hook = ["--on-install", "exit 1"] if worker_id == FAILING_HOOK else []
            argv = cli("worker", "--store", url, "--out-dir", str(root / worker_id),
                       "--worker-id", worker_id, "--region", region,
                       "--poll-interval-s", str(poll_s), *hook)  # fmt: skip
            log = (root / f"{worker_id}.log").open("w")
            workers.append(subprocess.Popen(argv, stderr=log))
        try:
            deadline = time.monotonic() + 120
            while not all((root / w / "model.safetensors").exists() for w, _, _ in WORKERS):
                if time.monotonic() > deadline:
                    raise SystemExit("the workers did not install v1 within 120 s")
                time.sleep(0.2)
            for version in range(2, args.versions + 1):
                time.sleep(6)
                state = nudge_state(state, 0.01, seed=version)
                pub.publish(state, version)
            time.sleep(6)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
                worker.wait(30)
        return subprocess.run(
            cli("status", "--store", url, "--no-record", "--plot", args.out), check=False
        ).returncode


if __name__ == "__main__":
    sys.exit(main())
