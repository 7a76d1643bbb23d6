"""Object-store libraries compared on local emulators: 1 GiB up and down, conditional writes.

    .venv/bin/python benchmarks/stores.py [--gib 1] [--only s3,gs,az]

Each candidate moves the same bytes in the same pattern as a publish and a pull:
``--gib`` of random bytes as 64 MiB objects, uploaded in 16 MiB parts and read
back as 16 MiB ranged reads, 8 requests in flight. The wanrl-s3 backends go
through their ``ObjectStore`` (``open_writer``, ``read_into``: what Publisher and
Subscriber use); obstore and adlfs through their own calls. Servers:
moto (s3://), fake-gcs-server (gs://), Azurite (az://), each on 127.0.0.1 in its
own process. "create-only" and "CAS" say whether the library refused a second
create and a stale compare-and-swap on that emulator (run here, not read off a
page). Candidates that are not installed are skipped (``pip install
'wanrl-s3[bench-stores]'``).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from wanrl_s3.store import ObjectStore, compare_and_swap, open_store
from wanrl_s3.testing import (
    azurite_connection_string_parts,
    local_azure,
    local_gcs,
    local_moto,
    make_azure_container,
    make_bucket,
    make_gcs_bucket,
)

MiB = 2**20
OBJECT_BYTES = 64 * MiB
PART_BYTES = 16 * MiB
IN_FLIGHT = 8


@dataclass
class Candidate:
    name: str
    put: Callable[[str, bytes], None]  # one whole object, uploaded in parts
    read: Callable[[str, int, memoryview], None]  # one ranged read into the buffer
    create_only: Callable[[str], bool]  # True if a second create was refused
    cas: Callable[[str], bool | None]  # True if a stale CAS was refused; None: no API


def _refused(fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except Exception:  # each library has its own error for a failed precondition
        return True
    return False


def ours(store: ObjectStore, pool: ThreadPoolExecutor, name: str) -> Candidate:
    def put(key: str, data: bytes) -> None:
        with store.open_writer(key, pool, part_bytes=PART_BYTES) as w:
            w.write(data)
            w.close()

    def create_only(key: str) -> bool:
        store.put_bytes(key, b"1", if_none_match=True)
        return _refused(lambda: store.put_bytes(key, b"2", if_none_match=True))

    def cas(key: str) -> bool:
        old = compare_and_swap(store, key, None, b"1")
        compare_and_swap(store, key, old, b"2")
        return _refused(lambda: compare_and_swap(store, key, old, b"3"))

    return Candidate(name, put, store.read_into, create_only, cas)


def obstore_candidate(store: Any, name: str) -> Candidate:
    import obstore as obs

    def put(key: str, data: bytes) -> None:
        obs.put(store, key, data, use_multipart=True, chunk_size=PART_BYTES, max_concurrency=4)

    def read(key: str, offset: int, buf: memoryview) -> None:
        buf[:] = memoryview(obs.get_range(store, key, start=offset, length=len(buf)))

    def create_only(key: str) -> bool:
        obs.put(store, key, b"1", mode="create")
        return _refused(lambda: obs.put(store, key, b"2", mode="create"))

    def cas(key: str) -> bool:
        put = obs.put(store, key, b"1", mode="create")
        first: Any = {k: v for k, v in put.items() if v is not None}  # UpdateVersion
        obs.put(store, key, b"2", mode=first)
        return _refused(lambda: obs.put(store, key, b"3", mode=first))

    return Candidate(name, put, read, create_only, cas)


def fsspec_candidate(fs: Any, root: str, name: str) -> Candidate:
    def put(key: str, data: bytes) -> None:
        fs.pipe_file(f"{root}/{key}", data)

    def read(key: str, offset: int, buf: memoryview) -> None:
        buf[:] = fs.cat_file(f"{root}/{key}", start=offset, end=offset + len(buf))

    def create_only(key: str) -> bool:
        fs.pipe_file(f"{root}/{key}", b"1", mode="create")
        return _refused(lambda: fs.pipe_file(f"{root}/{key}", b"2", mode="create"))

    return Candidate(name, put, read, create_only, lambda key: None)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


def run(c: Candidate, total_bytes: int, pool: ThreadPoolExecutor) -> dict[str, Any]:
    data = os.urandom(OBJECT_BYTES)
    keys = [f"bench/{slug(c.name)}/{i:04d}.bin" for i in range(total_bytes // OBJECT_BYTES)]
    with ThreadPoolExecutor(max(1, IN_FLIGHT // 4)) as objects:  # objects x parts in flight
        t0 = time.perf_counter()
        list(objects.map(lambda k: c.put(k, data), keys))
        up_s = time.perf_counter() - t0
    buf = memoryview(bytearray(OBJECT_BYTES))
    t0 = time.perf_counter()
    for key in keys:
        ranges = range(0, OBJECT_BYTES, PART_BYTES)
        list(pool.map(lambda o, k=key: c.read(k, o, buf[o : o + PART_BYTES]), ranges))
    down_s = time.perf_counter() - t0
    ok = bytes(buf) == data
    mb = total_bytes / 1e6
    return {
        "up_mbps": mb / up_s,
        "down_mbps": mb / down_s,
        "intact": ok,
        "create_only": c.create_only(f"bench/{slug(c.name)}/m.json"),
        "cas": c.cas(f"bench/{slug(c.name)}/LATEST"),
    }


@contextmanager
def s3_candidates(pool: ThreadPoolExecutor) -> Iterator[list[Candidate]]:
    with local_moto() as endpoint:
        bucket = make_bucket(endpoint)
        found = [ours(open_store(f"s3://{bucket}", endpoint_url=endpoint), pool, "s3 boto3 (ours)")]
        try:
            from obstore.store import S3Store

            found.append(obstore_candidate(
                S3Store(bucket, endpoint=endpoint, region="us-east-1", access_key_id="testing",
                        secret_access_key="testing", client_options={"allow_http": True}),
                "s3 obstore"))  # fmt: skip
        except ImportError:
            print("obstore not installed: skipped")
        yield found


@contextmanager
def gs_candidates(pool: ThreadPoolExecutor) -> Iterator[list[Candidate]]:
    with local_gcs() as endpoint:
        bucket = make_gcs_bucket(endpoint)
        store = open_store(f"gs://{bucket}", endpoint_url=endpoint)
        found = [ours(store, pool, "gs google-cloud-storage (ours)")]
        # gcsfs (2026.10) is not run: before each call it asks the bucket's type over
        # gRPC with TLS, which the emulator does not speak (60 s timeout per call).
        # obstore's GCS client is not run: against fake-gcs-server it percent-encodes
        # '-' and '.' in object paths (every request 404s) and, without a key file, asks
        # the cloud metadata address for a token; see docs/benchmarks.md.
        yield found


@contextmanager
def az_candidates(pool: ThreadPoolExecutor) -> Iterator[list[Candidate]]:
    with local_azure() as conn:
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = conn
        container = make_azure_container(conn)
        found = [ours(open_store(f"az://{container}"), pool, "az azure-storage-blob (ours)")]
        account, key, endpoint = azurite_connection_string_parts(conn)
        try:
            from obstore.store import AzureStore

            found.append(obstore_candidate(
                AzureStore(container, account_name=account, access_key=key, endpoint=endpoint,
                           client_options={"allow_http": True}),
                "az obstore"))  # fmt: skip
        except ImportError:
            print("obstore not installed: skipped")
        try:
            import adlfs

            fs = adlfs.AzureBlobFileSystem(connection_string=conn, skip_instance_cache=True)
            found.append(fsspec_candidate(fs, container, "az adlfs"))
        except ImportError:
            print("adlfs not installed: skipped")
        yield found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--only", default="s3,gs,az")
    args = ap.parse_args()
    total = int(args.gib * 2**30) // OBJECT_BYTES * OBJECT_BYTES
    makers = {"s3": s3_candidates, "gs": gs_candidates, "az": az_candidates}
    print("| library | up MB/s | down MB/s | intact | create-only refused | stale CAS refused |")
    print("| --- | ---: | ---: | --- | --- | --- |")
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        for cloud in args.only.split(","):
            with ExitStack() as stack:
                for c in stack.enter_context(makers[cloud](pool)):
                    r = run(c, total, pool)
                    cas = "no API" if r["cas"] is None else r["cas"]
                    print(f"| {c.name} | {r['up_mbps']:.0f} | {r['down_mbps']:.0f} | "
                          f"{r['intact']} | {r['create_only']} | {cas} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
