"""az:// upload: ours, ours without the Content-MD5 (measurement only), obstore, adlfs.
Interleaved rounds; wall MB/s, client CPU s/GB (this process), server CPU s/GB (Azurite)."""

import os
import pathlib
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "benchmarks"))
import stores as S

import wanrl_s3.store.azure as A


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def kid_cpu():
    t = os.sysconf("SC_CLK_TCK")
    tot = 0.0
    for st in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            f = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[1]) == os.getpid():
            tot += (int(f[11]) + int(f[12])) / t
    return tot


class NoMD5(A.AzureBlobStore):
    def _mpu_put(self, key, upload_id, part_number, data):
        block = A._block_id(upload_id, part_number)
        self._call("x", lambda: self._blob(key).stage_block(block, data, length=len(data)))
        return block


def pin_apart():
    """Azurite (every descendant of this process) on the last CPU, this process on the first."""
    kids, todo = set(), {os.getpid()}
    while todo:
        parent = todo.pop()
        for st in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:
                f = st.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(f[1]) == parent and int(st.parent.name) not in kids:
                kids.add(int(st.parent.name))
                todo.add(int(st.parent.name))
    for pid in kids:
        for t in pathlib.Path(f"/proc/{pid}/task").iterdir():
            os.sched_setaffinity(int(t.name), {1})
    for t in pathlib.Path("/proc/self/task").iterdir():
        os.sched_setaffinity(int(t.name), {0})
    print("pinned: server pids", sorted(kids), "on cpu 1, client on cpu 0")


N = int(os.environ.get("NOBJ", "4"))
R = int(os.environ.get("ROUNDS", "6"))
print("start", time.strftime("%H:%M:%S", time.gmtime()), "load", os.getloadavg())
with ThreadPoolExecutor(8) as pool, S.az_candidates(pool, "") as cands:
    cont = cands[0].cleanup.container
    if os.environ.get("PIN"):
        pin_apart()
    cands = [c for c in cands if c.put is not None]
    cands.insert(1, S.ours(NoMD5(cont), pool, "ours without Content-MD5 (measurement only)"))
    data = os.urandom(S.OBJECT_BYTES)
    res = {c.name: [] for c in cands}
    for r in range(R):
        for c in cands[r % len(cands) :] + cands[: r % len(cands)]:
            keys = [f"p/{S.slug(c.name)}/{r}/{i}" for i in range(N)]
            c0, k0, t0 = cpu(), kid_cpu(), time.perf_counter()
            with ThreadPoolExecutor(2) as objs:
                list(objs.map(partial(c.put, data=data), keys))
            w, cc, kc = time.perf_counter() - t0, cpu() - c0, kid_cpu() - k0
            gb = N * S.OBJECT_BYTES / 1e9
            res[c.name].append((gb / w * 1000, cc / gb, kc / gb))
            cands[0].cleanup.delete(keys)
print("end", time.strftime("%H:%M:%S", time.gmtime()), "load", os.getloadavg())
ours = res[cands[0].name]
for n, rows in res.items():
    ratio = [o[0] / x[0] for o, x in zip(ours, rows, strict=True)]
    mbps, client, server = ([r[k] for r in rows] for k in range(3))
    print(
        f"| {n} | {statistics.median(mbps):.0f} ({min(mbps):.0f}-{max(mbps):.0f}) "
        f"| {statistics.median(client):.2f} | {statistics.median(server):.2f} "
        f"| {statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) |"
    )
