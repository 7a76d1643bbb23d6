"""Our store backends against other object-store libraries, on local servers, interleaved.

    .venv/bin/python benchmarks/stores.py [--gib 0.5] [--repeat 3] [--only s3,gs,az]
                                          [--server seaweedfs|moto]

Each candidate moves the same bytes in the same pattern as a publish and a pull:
``--gib`` of random bytes as 64 MiB objects, uploaded in 16 MiB parts (every
library set to that layout), 2 objects at a time; then read back as 16 MiB
ranged reads into one buffer, 8 requests in flight, every byte compared. Every
candidate reads the same objects, those our backend wrote in that round: a
server may serve two layouts of the same bytes at different costs. The
wanrl-s3 backends go through their ``ObjectStore`` (``open_writer``,
``read_into``: what Publisher and Subscriber use); the other libraries through
their own calls, each copying what it returns into the buffer (a pull needs the
bytes in the tensor's memory). Servers: SeaweedFS (s3://; moto with
``--server moto``), fake-gcs-server (gs://), Azurite (az://), each on 127.0.0.1
in its own process.

The candidates take turns, ``--repeat`` rounds, the order rotated every round so
that none always goes first; the table gives each one's median MB/s with the
lowest and highest round, and "ours / best other" divides our MB/s by the
fastest other library's in the same round (median, lowest-highest). On a loaded
machine the absolute MB/s swing from round to round; the ratios within a round
are what carries over. "create-only" and "CAS": whether the library refused a
second create and a stale compare-and-swap on that server (tried, not read off
a page). Libraries that are not installed are skipped (``pip install
'wanrl-s3[bench]'``).
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

import boto3

from wanrl_s3.store import ObjectStore, PartSlots, compare_and_swap, open_store
from wanrl_s3.testing import (
    azurite_connection_string_parts,
    local_azure,
    local_gcs,
    local_moto,
    local_s3,
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
    put: Callable[[str, bytes], None] | None  # one whole object, uploaded in parts
    read: Callable[[str, int, memoryview], None]  # one ranged read into the buffer
    create_only: Callable[[str], bool] | None  # True if a second create was refused
    cas: Callable[[str], bool | None] | None  # True if a stale CAS was refused; None: no API
    floor: bool = False  # not a library: the fastest a Python thread can read (see raw_http)
    cleanup: ObjectStore | None = None  # ours: the store that deletes every round's objects
    up_mbps: list[float] = field(default_factory=list)
    down_mbps: list[float] = field(default_factory=list)


def _refused(fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except Exception:  # each library has its own error for a failed precondition
        return True
    return False


def ours(store: ObjectStore, pool: ThreadPoolExecutor, name: str) -> Candidate:
    slots = PartSlots(IN_FLIGHT + 2)  # shared by every object, as a publish's writers share it

    def put(key: str, data: bytes) -> None:
        with store.open_writer(key, pool, part_bytes=PART_BYTES, slots=slots) as w:
            w.write(data)
            w.close()

    def create_only(key: str) -> bool:
        store.put_bytes(key, b"1", if_none_match=True)
        return _refused(lambda: store.put_bytes(key, b"2", if_none_match=True))

    def cas(key: str) -> bool:
        old = compare_and_swap(store, key, None, b"1")
        compare_and_swap(store, key, old, b"2")
        return _refused(lambda: compare_and_swap(store, key, old, b"3"))

    return Candidate(name, put, store.read_into, create_only, cas, cleanup=store)


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


def fsspec_candidate(fs: Any, root: str, name: str, **put_options: Any) -> Candidate:
    def put(key: str, data: bytes) -> None:
        fs.pipe_file(f"{root}/{key}", data, **put_options)

    def read(key: str, offset: int, buf: memoryview) -> None:
        buf[:] = fs.cat_file(f"{root}/{key}", start=offset, end=offset + len(buf))

    def create_only(key: str) -> bool:
        fs.pipe_file(f"{root}/{key}", b"1", mode="create")
        return _refused(lambda: fs.pipe_file(f"{root}/{key}", b"2", mode="create"))

    return Candidate(name, put, read, create_only, lambda key: None)


def raw_http(url_of: Callable[[str], str], range_header: str) -> Candidate:
    """Ranged GETs with http.client alone, one connection per request, into the buffer.

    No library: what the fastest reader written in Python with a thread per
    request can do against this server, in this process, on this machine. The
    URL carries its own credentials (a presigned URL, a SAS, none on the GCS
    emulator).
    """

    def read(key: str, offset: int, buf: memoryview) -> None:
        url = urlsplit(url_of(key))
        conn = http.client.HTTPConnection(url.hostname or "", url.port)
        try:
            end = offset + len(buf) - 1
            conn.request(
                "GET", f"{url.path}?{url.query}", headers={range_header: f"bytes={offset}-{end}"}
            )
            resp = conn.getresponse()
            if resp.status != 206:
                raise SystemExit(f"raw GET {key}: {resp.status} {resp.read()[:200]!r}")
            done = 0
            while done < len(buf) and (n := resp.readinto(buf[done:])):
                done += n
        finally:
            conn.close()

    return Candidate("python http.client (floor)", None, read, None, None, floor=True)


def slug(name: str) -> str:
    # letters and digits only: obstore's GCS client percent-encodes '-' and '.'
    return re.sub(r"[^A-Za-z0-9]+", "", name)


def upload(c: Candidate, keys: list[str], data: bytes) -> None:
    """Upload every key, 2 objects at a time (x 4 parts each: 8 requests in flight)."""
    if c.put is None:
        return
    put = c.put
    with ThreadPoolExecutor(max(1, IN_FLIGHT // 4)) as objects:
        t0 = time.perf_counter()
        list(objects.map(lambda k: put(k, data), keys))
        c.up_mbps.append(len(keys) * OBJECT_BYTES / 1e6 / (time.perf_counter() - t0))


def download(c: Candidate, keys: list[str], data: bytes, pool: ThreadPoolExecutor) -> None:
    """Read every key back as 16 MiB ranges into one buffer, 8 in flight; check the bytes."""
    buf = memoryview(bytearray(OBJECT_BYTES * len(keys)))
    reads = [
        (key, offset, buf[i * OBJECT_BYTES + offset :][:PART_BYTES])
        for i, key in enumerate(keys)
        for offset in range(0, OBJECT_BYTES, PART_BYTES)
    ]
    t0 = time.perf_counter()
    list(pool.map(lambda r: c.read(*r), reads))
    c.down_mbps.append(len(keys) * OBJECT_BYTES / 1e6 / (time.perf_counter() - t0))
    for i, key in enumerate(keys):
        if bytes(buf[i * OBJECT_BYTES : (i + 1) * OBJECT_BYTES]) != data:
            raise SystemExit(f"{c.name}: {key} came back damaged")


def compare(candidates: list[Candidate], total_bytes: int, repeat: int) -> None:
    """Rounds of: every candidate uploads its own objects; every one reads ours back.

    The reads go to the same objects (the layout a publish makes: 16 MiB parts or
    blocks), since a server may serve two layouts of the same bytes at different
    costs (Azurite does: see docs/results/stores.md).
    """
    data = os.urandom(OBJECT_BYTES)
    mine = next(c for c in candidates if c.cleanup is not None)
    store = mine.cleanup
    assert store is not None

    def keys(c: Candidate, rnd: int) -> list[str]:
        return [f"bench/{slug(c.name)}/r{rnd}/{i:04d}" for i in range(total_bytes // OBJECT_BYTES)]

    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        for rnd in range(repeat):
            shift = rnd % len(candidates)
            order = candidates[shift:] + candidates[:shift]  # none always goes first
            for c in order:
                upload(c, keys(c, rnd), data)
                if c is not mine and c.put is not None:
                    if any(getattr(store.head(k), "size", 0) != OBJECT_BYTES for k in keys(c, rnd)):
                        raise SystemExit(f"{c.name}: an upload is missing or short")
                    store.delete(keys(c, rnd))  # the emulators hold everything in memory
            for c in order:
                download(c, keys(mine, rnd), data, pool)
            store.delete(keys(mine, rnd))


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def ratio_spread(mine: list[float], others: list[list[float]]) -> str:
    others = [o for o in others if o]
    if not mine or not others:
        return "-"
    per_round = [m / max(o[i] for o in others) for i, m in enumerate(mine)]
    return f"{statistics.median(per_round):.2f} ({min(per_round):.2f}-{max(per_round):.2f})"


def report(candidates: list[Candidate]) -> None:
    for c in candidates:
        cas = c.cas(f"bench/{slug(c.name)}/LATEST") if c.cas else "-"
        create_only = c.create_only(f"bench/{slug(c.name)}/mjson") if c.create_only else "-"
        print(f"| {c.name} | {spread(c.up_mbps)} | {spread(c.down_mbps)} | {create_only} | "
              f"{'no API' if cas is None else cas} |", flush=True)  # fmt: skip
    mine = next(c for c in candidates if c.cleanup is not None)
    groups = {
        "best other library": [c for c in candidates if c.cleanup is None and not c.floor],
        "python http.client": [c for c in candidates if c.floor],
    }
    for label, others in groups.items():
        if others:
            up = ratio_spread(mine.up_mbps, [o.up_mbps for o in others])
            down = ratio_spread(mine.down_mbps, [o.down_mbps for o in others])
            print(f"| ours / {label}, per round | {up} | {down} | | |")


@contextmanager
def s3_candidates(pool: ThreadPoolExecutor, server: str) -> Iterator[list[Candidate]]:
    with local_moto() if server == "moto" else local_s3() as endpoint:
        bucket = make_bucket(endpoint)
        store = open_store(f"s3://{bucket}", endpoint_url=endpoint)
        found = [ours(store, pool, "s3 boto3 (ours)")]
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        found.append(raw_http(lambda key: s3.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600),
            "Range"))  # fmt: skip
        try:
            from obstore.store import S3Store

            found.append(obstore_candidate(
                S3Store(bucket, endpoint=endpoint, region="us-east-1",
                        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                        client_options={"allow_http": True}),
                "s3 obstore"))  # fmt: skip
        except ImportError:
            print("obstore not installed: skipped")
        yield found


@contextmanager
def gs_candidates(pool: ThreadPoolExecutor, server: str) -> Iterator[list[Candidate]]:
    with local_gcs() as endpoint:
        bucket = make_gcs_bucket(endpoint)
        store = open_store(f"gs://{bucket}", endpoint_url=endpoint)
        found = [ours(store, pool, "gs google-cloud-storage (ours)")]
        found.append(raw_http(lambda key: f"{endpoint}/download/storage/v1/b/{bucket}/o/"
                              f"{quote(key, safe='')}?alt=media", "Range"))  # fmt: skip
        # gcsfs (2026.10) is not run: before each call it asks the bucket's type over
        # gRPC with TLS, which the emulator does not speak (60 s timeout per call).
        yield found


@contextmanager
def az_candidates(pool: ThreadPoolExecutor, server: str) -> Iterator[list[Candidate]]:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    with local_azure() as conn:
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = conn
        container = make_azure_container(conn)
        found = [ours(open_store(f"az://{container}"), pool, "az azure-storage-blob (ours)")]
        account, key, endpoint = azurite_connection_string_parts(conn)
        sas = generate_container_sas(account, container, account_key=key,
                                     permission=ContainerSasPermissions(read=True),
                                     expiry=datetime.now(UTC) + timedelta(hours=6))  # fmt: skip
        found.append(raw_http(lambda name: f"{endpoint}/{container}/{name}?{sas}", "x-ms-range"))
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
            # the same layout as the others (16 MiB blocks, 4 in flight), not one 64 MiB PUT
            fs.service_client._config.max_single_put_size = PART_BYTES
            fs.service_client._config.max_block_size = PART_BYTES
            found.append(fsspec_candidate(fs, container, "az adlfs", max_concurrency=4))
        except ImportError:
            print("adlfs not installed: skipped")
        yield found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="s3,gs,az")
    ap.add_argument("--server", choices=["seaweedfs", "moto"], default="seaweedfs",
                    help="the S3 server of the s3 rows")  # fmt: skip
    args = ap.parse_args()
    total = max(OBJECT_BYTES, int(args.gib * 2**30) // OBJECT_BYTES * OBJECT_BYTES)
    makers = {"s3": s3_candidates, "gs": gs_candidates, "az": az_candidates}
    print(f"{total / 2**30:.2f} GiB per candidate and round, {args.repeat} rounds, "
          f"s3 on {args.server}")  # fmt: skip
    print("| library | up MB/s, median (min-max) | down MB/s | create-only refused "
          "| stale CAS refused |")  # fmt: skip
    print("| --- | ---: | ---: | --- | --- |")
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        for cloud in args.only.split(","):
            with ExitStack() as stack:
                candidates = stack.enter_context(makers[cloud](pool, args.server))
                load = os.getloadavg()[0]
                compare(candidates, total, args.repeat)
                report(candidates)
                print(f"| ({cloud}: load average {load:.1f} -> {os.getloadavg()[0]:.1f} "
                      f"on {os.cpu_count()} cores) | | | | |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
