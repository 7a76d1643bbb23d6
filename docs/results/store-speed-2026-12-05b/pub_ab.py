"""Publish A/B on SeaweedFS: s3:// parts sent as bytes of their own (takes_part_buffers
False) against from the writer's reused buffers (as shipped), alternating rounds. A probe."""

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

from wanrl_s3 import PublishConfig, Publisher, SafetensorsFile, open_store
from wanrl_s3.store.s3 import S3Store
from wanrl_s3.testing import local_s3, make_bucket

work = Path(tempfile.mkdtemp(prefix="speed-pub-", dir="/tmp/speed-work"))
src = work / "s.safetensors"
n = T.make_snapshot(src, float(os.environ.get("GIB", "0.5")))
tensors = dict(SafetensorsFile(src).items())
res = {"bytes": [], "lent": []}
with local_s3() as ep:
    store = open_store(f"s3://{make_bucket(ep)}/w", endpoint_url=ep)
    ver = 0
    for i in range(int(os.environ.get("ROUNDS", "4"))):
        for v in ["bytes", "lent"] if i % 2 == 0 else ["lent", "bytes"]:
            S3Store.takes_part_buffers = v == "lent"
            ver += 1
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            k0 = T.server_cpu_s()
            t0 = time.perf_counter()
            Publisher(store, PublishConfig(delta="never")).publish(tensors, ver)
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
            store.delete([o.key for o in store.list()])
shutil.rmtree(work)
print("load", os.getloadavg())


def _med(rows, j):
    return statistics.median(r[j] for r in rows)


for v, rows in res.items():
    print(
        f"{v:6s} MB/s {_med(rows, 0):5.0f} {[round(r[0]) for r in rows]} user {_med(rows, 1):.2f} sys {_med(rows, 2):.2f} s/GB minflt/GB {_med(rows, 3):.0f} server {_med(rows, 4):.2f}"  # noqa: E501
    )
