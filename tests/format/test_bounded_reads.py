"""Everything read from a store is bounded before it is parsed, and before it is read.

Whoever can write a bucket can make LATEST, a manifest or a worker's status
object a gigabyte. Each reader asks for its limit plus one byte (a ranged GET)
and refuses a larger object having read no more: checked here over real HTTP
(SeaweedFS behind a counting proxy) by the bytes that crossed the wire and the
requests made. The memory a whole CLI process spends on such objects is
measured by the fault campaign (benchmarks/faults.py, docs/results/faults.md).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from wanrl_s3.errors import ManifestError
from wanrl_s3.fleet import status
from wanrl_s3.format import latest, layout
from wanrl_s3.format.manifest import MAX_MANIFEST_BYTES
from wanrl_s3.format.manifests import Manifests
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import FaultProxy, make_bucket

ROOT = Path(__file__).resolve().parents[2]
MiB = 2**20
HUGE_BYTES = 64 * MiB + 1  # past every JSON limit (the manifest's is 64 MiB)


@pytest.fixture(scope="module")
def huge_store(s3_endpoint: str) -> str:
    """A bucket whose LATEST, manifest of v1 and one status object are 64 MiB each."""
    bucket = make_bucket(s3_endpoint)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    body = b" " * HUGE_BYTES  # valid JSON whitespace: only its size is wrong
    for key in (layout.LATEST_KEY, layout.manifest_key(1), "workers/huge.json"):
        client.put_object(Bucket=bucket, Key=f"run/{key}", Body=body)
    client.put_object(Bucket=bucket, Key="run/workers/fine.json", Body=_status("fine"))
    return f"s3://{bucket}/run"


def _status(worker_id: str) -> bytes:
    return status.WorkerStatus(worker_id=worker_id).to_json()


@pytest.fixture
def counted(huge_store: str, s3_endpoint: str) -> Iterator[tuple[ObjectStore, FaultProxy]]:
    """The huge store through a proxy that counts requests and response bytes."""
    with FaultProxy(s3_endpoint) as proxy:
        yield open_store(huge_store, endpoint_url=proxy.url), proxy


def test_latest_over_its_limit_is_one_get_of_the_limit_and_a_byte(
    counted: tuple[ObjectStore, FaultProxy],
) -> None:
    store, proxy = counted
    for read in (latest.read, lambda s: latest.poll(s, '"older"')):  # a pull; a worker's poll
        proxy.reset_counters()
        with pytest.raises(ManifestError) as refused:
            read(store)
        assert (proxy.requests, proxy.response_bytes) == (1, latest.MAX_LATEST_BYTES + 1)
        assert "LATEST is larger than 64 KiB" in str(refused.value)
    proxy.reset_counters()
    # a writer overwrites a corrupt pointer: its ETag comes from a HEAD, not the body
    version, etag = latest.committed_version(store)
    assert version == -1 and etag is not None
    assert proxy.response_bytes <= latest.MAX_LATEST_BYTES + 1


def test_a_manifest_over_its_limit_is_refused_having_read_the_limit_and_a_byte(
    counted: tuple[ObjectStore, FaultProxy],
) -> None:
    store, proxy = counted
    with pytest.raises(ManifestError, match="larger than the 67,108,864-byte limit"):
        Manifests(store).get(1)
    assert proxy.requests == 1 and proxy.response_bytes == MAX_MANIFEST_BYTES + 1


def test_a_status_object_over_its_limit_is_skipped_having_read_the_limit_and_a_byte(
    counted: tuple[ObjectStore, FaultProxy],
) -> None:
    store, proxy = counted
    found = status.read_statuses(store)
    assert [s.worker_id for s in found] == ["fine"]  # the huge one hides nobody
    listing = proxy.response_bytes - len(_status("fine")) - (status.MAX_STATUS_BYTES + 1)
    assert 0 < listing < 64 * 1024, proxy.response_bytes  # a listing, one status, 4 MiB + 1


# -- every whole-object read in the product is bounded ---------------------------------
WHOLE_READS = {"get_bytes", "get_if_changed", "get_or_none"}  # and .get on a store


def unbounded_reads(source: str, path: str) -> list[str]:
    """Each call in ``source`` that reads a whole object from a store without its bound:
    a helper without ``max_bytes``, or the primitive ``x._get`` (a store that wraps
    another, as the CDN reader does) without ``max_read_bytes``."""
    found = []
    for call in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        on_store = isinstance(func, ast.Attribute) and "store" in ast.unparse(func.value).lower()
        bounds = {k.arg for k in call.keywords}
        helper = name in WHOLE_READS or (name == "get" and on_store)
        primitive = name == "_get" and isinstance(func, ast.Attribute)
        if (helper and "max_bytes" not in bounds) or (primitive and "max_read_bytes" not in bounds):
            found.append(f"{path}:{call.lineno}: {ast.unparse(call)[:80]}")
    return found


def test_no_whole_object_is_read_from_a_store_without_a_bound() -> None:
    """Invariant 10: the one place a reader says how much it accepts is the read itself."""
    sources = sorted(p for top in ("wanrl_s3", "integrations") for p in (ROOT / top).rglob("*.py"))
    exempt = ("wanrl_s3/store/", "wanrl_s3/testing/")  # the protocol itself, and its tests
    offences = [
        offence
        for p in sources
        if not p.relative_to(ROOT).as_posix().startswith(exempt)
        for offence in unbounded_reads(p.read_text(encoding="utf-8"), p.name)
    ]
    assert len(sources) > 50 and offences == [], "\n".join(offences)


@pytest.mark.parametrize(
    "source",
    [
        "data = store.get_bytes(key)",
        "blob = self.store.get(key)",
        "blob = get_or_none(store, layout.LATEST_KEY)",
        "blob = primary_store.get_if_changed(k, etag)",
        "blob = self._origin._get(key, if_none_match=etag)",
    ],
)
def test_the_scan_finds_each_unbounded_read(source: str) -> None:
    assert unbounded_reads(source, "x.py")


def test_the_scan_leaves_bounded_reads_and_dicts_alone() -> None:
    source = (
        "store.get_bytes(key, max_bytes=MAX)\n"
        "get_or_none(store, key, max_bytes=1)\n"
        "options.get('x')\n"
        "os.environ.get('HOME')\n"
        "self._origin._get(key, max_read_bytes=limit)\n"
        "_get(store)\n"
    )
    assert unbounded_reads(source, "x.py") == []
