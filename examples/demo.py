"""The wanrl-s3 demo: publish a policy, pull it from another process, then ship a delta.

    make demo

1. starts a local S3 endpoint (moto's ThreadedMotoServer on 127.0.0.1),
2. builds a 291M-parameter LLaMA-style policy (582 MB of bf16 tensors),
3. publishes it as version 1 (a full keyframe) from this process,
4. pulls it back with `wanrl-s3 pull` in another process and checks it bit for bit,
5. moves 1% of the weights by one bf16 ulp (what a few RL steps at lr ~1e-6 do),
   publishes version 2, which goes out as a sparse bit-exact delta,
6. pulls version 2 in another process with `--have` the version-1 file, so only the
   delta moves, and checks it bit for bit again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from wanrl_s3.io.safetensors_file import SafetensorsFile
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store
from wanrl_s3.testing import local_s3, make_bucket
from wanrl_s3.testing.synthetic import (
    llama_like_layout,
    nudge_state,
    param_count,
    random_bf16_state,
)

CLI = [sys.executable, "-m", "wanrl_s3.cli"]


def pull(store_url: str, endpoint: str, out: Path, version: int, have: Path | None) -> dict:
    """`wanrl-s3 pull` in a separate process; returns its JSON summary."""
    cmd = [
        *CLI,
        "pull",
        "--store",
        store_url,
        "--endpoint-url",
        endpoint,
        "--version",
        str(version),
        "--out",
        str(out),
        "--json",
    ]
    if have is not None:
        cmd += ["--have", str(have)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pull failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def identical(path: Path, tensors: dict[str, np.ndarray]) -> bool:
    got = SafetensorsFile(path)
    return set(got.specs) == set(tensors) and all(
        got.array(name).tobytes() == arr.tobytes() for name, arr in tensors.items()
    )


def report(label: str, nbytes: int, seconds: float) -> str:
    rate = nbytes / seconds / 1e6
    return f"{label}: {nbytes / 1e6:,.1f} MB in {seconds:.2f} s ({rate:,.0f} MB/s)"


def pulled(label: str, summary: dict, wall_s: float) -> str:
    return (
        f"{label}: {summary['downloaded_bytes'] / 1e6:,.2f} MB downloaded in "
        f"{summary['download_s']:.2f} s, every tensor verified in {summary['verify_s']:.2f} s "
        f"({wall_s:.1f} s for the whole command)"
    )


def main() -> None:
    layout = llama_like_layout("demo-300m")
    t = time.perf_counter()
    v1 = random_bf16_state(layout, seed=0)
    raw = sum(a.nbytes for a in v1.values())
    print(
        f"policy: {len(v1)} tensors, {param_count(layout) / 1e6:.0f}M parameters, "
        f"{raw / 1e6:,.0f} MB of bf16 (built in {time.perf_counter() - t:.1f} s)"
    )
    with tempfile.TemporaryDirectory(prefix="wanrl-demo-") as tmp, local_s3() as endpoint:
        work = Path(tmp)
        url = f"s3://{make_bucket(endpoint, 'wanrl-demo')}/runs/demo"
        print(f"local S3 endpoint {endpoint}, store {url}")
        publisher = Publisher(
            open_store(url, endpoint_url=endpoint), PublishConfig(keyframe_every=10), run_id="demo"
        )

        r1 = publisher.publish(v1, 1)
        print(report(f"publish v1 ({r1.kind})", r1.stored_bytes, r1.seconds))
        t = time.perf_counter()
        p1 = pull(url, endpoint, work / "v1.safetensors", 1, None)
        print(pulled("pull v1 in another process", p1, time.perf_counter() - t))
        ok1 = identical(work / "v1.safetensors", v1)
        print(f"v1 bit-identical after the round trip: {ok1}")

        v2 = nudge_state(v1, 0.01, seed=2)
        r2 = publisher.publish(v2, 2)
        print(
            f"publish v2 ({r2.kind} against v{r2.base_version}, {r2.density:.2%} of values "
            f"changed): {r2.stored_bytes / 1e6:.2f} MB stored, {r2.seconds:.2f} s to encode "
            "and upload"
        )
        t = time.perf_counter()
        p2 = pull(url, endpoint, work / "v2.safetensors", 2, work / "v1.safetensors")
        print(pulled("pull v2 --have v1 in another process", p2, time.perf_counter() - t))
        ok2 = identical(work / "v2.safetensors", v2)
        print(f"v2 bit-identical after the round trip: {ok2}")
        print(
            f"\nthe delta moved {p2['downloaded_bytes'] / p1['downloaded_bytes']:.2%} of the "
            f"bytes of a full snapshot ({p2['downloaded_bytes'] / 1e6:.2f} MB instead of "
            f"{p1['downloaded_bytes'] / 1e6:,.0f} MB)"
        )
    if not (ok1 and ok2):
        raise SystemExit("demo FAILED: a pulled version differs from what was published")


if __name__ == "__main__":
    main()
