"""Pull A/B on SeaweedFS: bytes into the file's map (file_span patched to None) against
pwrite through the file (as shipped), alternating rounds. A probe: it patches internals."""

import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import transfer as T

import wanrl_s3.store.sink as sink
from wanrl_s3 import PublishConfig, Publisher, SafetensorsFile, Subscriber, open_store, pull_to_file
from wanrl_s3.testing import local_s3, make_bucket

work = Path(tempfile.mkdtemp(prefix="speed-pull-", dir="/tmp/speed-work"))
src = work / "s.safetensors"
n = T.make_snapshot(src, float(os.environ.get("GIB", "0.5")))
tensors = dict(SafetensorsFile(src).items())
real = sink.file_span
res = {"map": [], "pwrite": []}
with local_s3() as ep:
    store = open_store(f"s3://{make_bucket(ep)}/w", endpoint_url=ep)
    Publisher(store, PublishConfig(delta="never")).publish(tensors, 1)
    for i in range(int(os.environ.get("ROUNDS", "4"))):
        for v in ["map", "pwrite"] if i % 2 == 0 else ["pwrite", "map"]:
            sink.file_span = real if v == "pwrite" else (lambda view: None)
            k0 = T.server_cpu_s()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            with Subscriber(store, concurrency=16) as sub:
                pull_to_file(sub, work / "o.st", 1)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            w = time.perf_counter() - t0
            gb = n / 1e9
            res[v].append(
                (
                    n / 1e6 / w,
                    (r1.ru_utime - r0.ru_utime) / gb,
                    (r1.ru_stime - r0.ru_stime) / gb,
                    (r1.ru_minflt - r0.ru_minflt) / gb,
                    (T.server_cpu_s() - k0) / gb,
                )
            )
            (work / "o.st").unlink()
shutil.rmtree(work)
print("load", os.getloadavg())


def _med(rows, j):
    return statistics.median(r[j] for r in rows)


for v, rows in res.items():
    print(
        f"{v:7s} MB/s {_med(rows, 0):5.0f} {[round(r[0]) for r in rows]} user {_med(rows, 1):.2f} sys {_med(rows, 2):.2f} s/GB (sys rounds {[round(r[2], 2) for r in rows]}) minflt/GB {_med(rows, 3):.0f} server {_med(rows, 4):.2f}"  # noqa: E501
    )
