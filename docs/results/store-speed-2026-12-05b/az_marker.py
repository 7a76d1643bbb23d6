"""The pending-upload marker of az:// (its PUT, the GET before the commit, the DELETE):
client and Azurite CPU per request, 200 of each. A probe: it calls the store's internals."""

import os
import pathlib
import resource

from wanrl_s3.store import open_store
from wanrl_s3.store.staging import marker_key
from wanrl_s3.testing import local_azure, make_azure_container


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def kid():
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


with local_azure() as conn:
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = conn
    s = open_store(f"az://{make_azure_container(conn)}")
    N = 200
    ids = []
    c0, k0 = cpu(), kid()
    for i in range(N):
        ids.append(s._mpu_create(f"k/{i}"))
    c1, k1 = cpu(), kid()
    for i, u in enumerate(ids):
        s._check_upload(f"k/{i}", u)
    c2, k2 = cpu(), kid()
    for u in ids:
        s._delete([marker_key(u)])
    c3, k3 = cpu(), kid()
    for name, c, k in [
        ("PUT marker", c1 - c0, k1 - k0),
        ("GET marker (check)", c2 - c1, k2 - k1),
        ("DELETE marker", c3 - c2, k3 - k2),
    ]:
        print(
            f"{name:20s} client {1000 * c / N:.2f} ms  server {1000 * k / N:.2f} ms per request; per GB of 64 MiB objects: client {16 * c / N:.3f} s, server {16 * k / N:.3f} s"  # noqa: E501
        )
