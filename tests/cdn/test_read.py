"""Reading through a real caching edge (nginx, started by the tests) in front of a real bucket.

The bucket is on SeaweedFS, a real S3 server; the edge is :func:`wanrl_s3.testing.local_cdn_edge`,
whose origin log counts every byte the bucket served it. Readers are the
product's own: a :class:`Subscriber` on a :class:`CdnReadStore`. The edge is
poisoned the way edges go wrong (a cached copy of other bytes, of a cut-short
object, of an HTML page, a 403 for every request, a manifest of an earlier run
on the same prefix), and no reader ever installs anything but the published bytes.
"""

from __future__ import annotations

import builtins
import json
import logging
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import numpy as np
import pytest

from tests.cdn.edges import nginx_edge
from wanrl_s3 import PublishConfig, Publisher, Subscriber
from wanrl_s3.cdn import CdnGrant, CdnReadStore
from wanrl_s3.format import layout
from wanrl_s3.store import Blob, ObjectInfo, ObjectStore, open_store
from wanrl_s3.testing import (
    CdnEdge,
    allow_edge_reads,
    make_bucket,
    nudge_state,
    random_bf16_state,
)

MiB = 1 << 20
PREFIX = "runs/test"


def policy(seed: int, mib: float = 2.5) -> dict[str, np.ndarray]:
    n = int(mib * MiB / 2 / 4)
    return random_bf16_state([(f"layer.{i}.w", (n,)) for i in range(4)], seed=seed)


def same(got: object, want: dict[str, np.ndarray]) -> bool:
    tensors = dict(got)  # type: ignore[call-overload]
    return set(tensors) == set(want) and all(
        np.array_equal(tensors[k].view(np.uint16), want[k].view(np.uint16)) for k in want
    )


class Counting(ObjectStore):
    """A store that counts the objects read from it: what the bucket served a reader itself."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner.retry)
        self.inner, self.reads = inner, Counter[str]()

    @property
    def url(self) -> str:
        return self.inner.url

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        self.reads[key] += 1
        return self.inner._get(key, if_none_match=if_none_match, max_read_bytes=max_read_bytes)

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        self.reads[key] += 1
        return self.inner._read_into(key, offset, buf)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        return self.inner._put(key, data, if_none_match=if_none_match, if_match=if_match)

    def _head(self, key: str) -> ObjectInfo | None:
        return self.inner._head(key)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        return self.inner._list(prefix)

    def _delete(self, keys: builtins.list[str]) -> None:
        self.inner._delete(keys)


@dataclass
class Run:
    """A bucket with a run prefix, its edge, and the CDN URL that serves the prefix."""

    endpoint: str
    bucket: str
    edge: CdnEdge

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{PREFIX}"

    @property
    def cdn_url(self) -> str:
        return f"{self.edge.url}/{self.bucket}/{PREFIX}"

    def store(self) -> ObjectStore:
        return open_store(self.url, endpoint_url=self.endpoint)

    def s3(self):  # type: ignore[no-untyped-def]
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def fills(self) -> list:  # type: ignore[type-arg]
        """What the edge fetched from the bucket under v/, once its log has settled."""
        return [r for r in settled(self.edge.origin_requests) if "/v/" in r.uri]


def settled(read):  # type: ignore[no-untyped-def]
    """An nginx log once no line has been added for 0.3 s (a line follows its response)."""
    before, deadline = read(), time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = read()
        if now == before:
            return now
        before = now
    return before


@pytest.fixture
def run(s3_endpoint: str) -> Iterator[Run]:
    with nginx_edge(s3_endpoint) as edge:
        yield opened(Run(s3_endpoint, make_bucket(s3_endpoint), edge))


def opened(run: Run) -> Run:
    """The run with its v/ and LATEST readable by the edge (as a CDN's bucket policy does)."""
    allow_edge_reads(run.endpoint, run.bucket, PREFIX)
    return run


def publish(store: ObjectStore, *states: dict[str, np.ndarray], first: int = 1) -> None:
    publisher = Publisher(store, PublishConfig(delta="always"))
    for version, state in enumerate(states, start=first):
        publisher.publish(state, version)


def edge_get(run: Run, key: str) -> bytes:
    with urllib.request.urlopen(f"{run.cdn_url}/{key}", timeout=30) as response:
        return bytes(response.read())


def payload_keys(store: ObjectStore, version: int) -> list[str]:
    return [o.key for o in store.list(f"v/{version:012d}") if o.key.endswith(".bin")]


# -- the bucket serves one copy, LATEST comes from the bucket --------------------------------
def test_two_readers_through_one_edge_cost_the_bucket_one_copy(run: Run) -> None:
    v1 = policy(1)
    v2 = nudge_state(v1, 0.05, seed=2)
    publish(run.store(), v1, v2)
    origins = [Counting(run.store()) for _ in range(2)]
    for origin in origins:
        with Subscriber(CdnReadStore(origin, run.cdn_url)) as sub:
            assert same(sub.fetch().tensors, v2)
            assert sub.store.fallbacks() == {}  # type: ignore[attr-defined]
        assert [k for k in origin.reads if k.startswith("v/")] == []  # all from the edge
        assert origin.reads["LATEST"] >= 1  # the pointer, from the bucket
    fills = run.fills()
    assert max(Counter((r.uri, r.range) for r in fills).values()) == 1  # each slice once
    # the bucket served every object of both versions exactly once, manifests included
    stored = sum(o.size for o in run.store().list("v/"))
    assert sum(r.body_bytes for r in fills) == stored
    served = [r for r in settled(run.edge.requests) if "/v/" in r.uri]
    assert sum(r.body_bytes for r in served) >= 2 * stored * 0.9  # both readers read it all
    assert not any(r.uri.endswith("/LATEST") for r in run.edge.requests())


def test_a_new_latest_is_seen_at_the_next_poll(run: Run) -> None:
    v1 = policy(3, mib=0.5)
    v2 = nudge_state(v1, 0.05, seed=4)
    publish(run.store(), v1)
    with Subscriber(CdnReadStore(run.store(), run.cdn_url)) as sub:
        found = sub.poll_latest(None)
        assert found is not None and found[0].version == 1
        assert same(sub.fetch().tensors, v1)  # the edge now holds v1
        assert sub.poll_latest(found[1]) is None
        publish(run.store(), v2, first=2)
        moved = sub.poll_latest(found[1])
        assert moved is not None and moved[0].version == 2  # the very next poll
        assert same(sub.fetch().tensors, v2)


def test_publish_lets_an_edge_keep_versions_and_never_latest(run: Run) -> None:
    store = run.store()
    v1 = policy(5, mib=0.5)
    publish(store, v1)
    head = run.s3().head_object(Bucket=run.bucket, Key=f"{PREFIX}/LATEST")
    assert head["CacheControl"] == "no-store"
    manifest = "v/000000000001/manifest.json"
    assert edge_get(run, manifest) == edge_get(run, manifest)
    assert edge_get(run, "LATEST") == store.get_bytes("LATEST")
    publish(store, nudge_state(v1, 0.05, seed=6), first=2)
    assert edge_get(run, "LATEST") == store.get_bytes("LATEST")  # never a stale pointer
    reached = Counter(r.uri.rsplit("/", 3)[-3:][-1] for r in settled(run.edge.origin_requests))
    assert reached["manifest.json"] == 1  # cached after the first read
    assert reached["LATEST"] == 2  # never cached


# -- a poisoned edge never produces a wrong install --------------------------------------
def poison(run: Run, key: str, bad: bytes, content_type: str = "binary/octet-stream") -> None:
    """Make the edge cache ``bad`` for ``key`` (the bucket held it when the edge filled),
    then put the right bytes back in the bucket."""
    s3, full = run.s3(), f"{PREFIX}/{key}"
    good = s3.get_object(Bucket=run.bucket, Key=full)["Body"].read()
    s3.put_object(Bucket=run.bucket, Key=full, Body=bad, ContentType=content_type,
                  CacheControl="public, max-age=31536000, immutable")  # fmt: skip
    assert edge_get(run, key) == bad  # cached now
    s3.put_object(Bucket=run.bucket, Key=full, Body=good,
                  CacheControl="public, max-age=31536000, immutable")  # fmt: skip
    assert edge_get(run, key) == bad  # and served from the cache


POISONS = {  # the right bytes -> what the edge caches instead, and its Content-Type
    "other bytes": lambda good: (bytes(b ^ 0x5A for b in good), "binary/octet-stream"),
    "cut short": lambda good: (good[: len(good) // 3], "binary/octet-stream"),
    "an HTML page": lambda good: (b"<html><body>Service unavailable</body></html>", "text/html"),
}


@pytest.mark.parametrize("kind", list(POISONS))
def test_a_poisoned_payload_object_is_read_from_the_bucket(
    run: Run, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    v1 = policy(7, mib=0.6)
    store = run.store()
    publish(store, v1)
    key = payload_keys(store, 1)[0]
    poison(run, key, *POISONS[kind](store.get_bytes(key)))
    with caplog.at_level(logging.INFO), Subscriber(CdnReadStore(store, run.cdn_url)) as sub:
        assert same(sub.fetch().tensors, v1)
        assert list(sub.store.fallbacks()) == [key]  # type: ignore[attr-defined]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and key in warnings[0].getMessage()


def test_a_poisoned_manifest_is_read_from_the_bucket(run: Run) -> None:
    v1 = policy(8, mib=0.5)
    store = run.store()
    publish(store, v1)
    key = "v/000000000001/manifest.json"
    edited = json.loads(store.get_bytes(key))
    edited["metadata"] = {"edited": "at the edge"}  # a valid manifest, not the one LATEST pins
    poison(run, key, json.dumps(edited).encode())
    with Subscriber(CdnReadStore(run.store(), run.cdn_url)) as sub:
        assert same(sub.fetch().tensors, v1)
        assert list(sub.store.fallbacks()) == [key]  # type: ignore[attr-defined]


def test_an_edge_that_refuses_every_request_costs_reads_from_the_bucket_only(
    s3_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 for every object (a grant the edge does not accept): each is read from the
    bucket, one warning says so, and the install is the published version."""
    with nginx_edge(s3_endpoint, require_arg=("token", "right")) as edge:
        run = opened(Run(s3_endpoint, make_bucket(s3_endpoint), edge))
        v1 = policy(9, mib=0.5)
        publish(run.store(), v1)

        def grant(token: str) -> CdnGrant:
            return CdnGrant("cloudflare", run.cdn_url, "v/", 2**40, query=f"token={token}")

        with Subscriber(CdnReadStore(run.store(), run.cdn_url, grant=grant("right"))) as sub:
            assert same(sub.fetch().tensors, v1)
            assert sub.store.fallbacks() == {}  # type: ignore[attr-defined]
        denied = CdnReadStore(run.store(), run.cdn_url, grant=grant("wrong"))
        with caplog.at_level(logging.INFO), Subscriber(denied) as sub:
            assert same(sub.fetch().tensors, v1)
        why = set(denied.fallbacks().values())
        assert why == {"the CDN answered HTTP 403"}
        assert set(denied.fallbacks()) == {
            *payload_keys(run.store(), 1),
            "v/000000000001/manifest.json",
        }
        assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
        assert not any("token=wrong" in r.getMessage() for r in caplog.records)


def test_a_version_collected_and_published_again_is_never_served_stale(run: Run) -> None:
    """gc removed v1 and the run started again on the same prefix: the edge still holds
    the first v1 (manifest and payload); readers get the second, bit for bit."""
    store = run.store()
    first, second = policy(10, mib=0.5), policy(11, mib=0.5)
    publish(store, first)
    with Subscriber(CdnReadStore(run.store(), run.cdn_url)) as sub:
        assert same(sub.fetch().tensors, first)  # the edge holds all of the first v1
    old_payload = set(payload_keys(store, 1))
    store.delete([o.key for o in store.list()])  # collected, LATEST included
    publish(store, second)  # a new run, another publish id
    assert not old_payload & set(payload_keys(store, 1))  # new keys: never asked of the edge
    with Subscriber(CdnReadStore(run.store(), run.cdn_url)) as sub:
        assert same(sub.fetch().tensors, second)
        # the stale manifest was refused (LATEST pins its digest) and read from the bucket
        assert list(sub.store.fallbacks()) == ["v/000000000001/manifest.json"]  # type: ignore[attr-defined]


# -- payload dealt over payload prefixes ------------------------------------------------
def test_spread_payload_is_read_through_the_edge_and_cached_there(run: Run) -> None:
    """Payload dealt over payload prefixes (``v/p<k>/...``) is under ``v/``: the edge
    caches it, the reader asks the edge for every object, the bucket fills each once."""
    state = policy(11)
    store = run.store()
    spread_config = PublishConfig(object_bytes=MiB // 2, full_coding="raw", payload_prefixes=3)
    Publisher(store, spread_config).publish(state, 1)
    spread = {o.key: o.size for o in store.list("v/") if o.key.startswith("v/p")}
    assert {key.split("/")[1] for key in spread} == {"p0", "p1", "p2"}
    head = run.s3().head_object(Bucket=run.bucket, Key=f"{PREFIX}/{next(iter(spread))}")
    assert head["CacheControl"] == layout.IMMUTABLE_CACHE_CONTROL
    for _ in range(2):
        origin = Counting(run.store())
        with Subscriber(CdnReadStore(origin, run.cdn_url)) as sub:
            assert same(sub.fetch().tensors, state)
            assert sub.store.fallbacks() == {}  # type: ignore[attr-defined]
        assert [k for k in origin.reads if k.startswith("v/")] == []  # all from the edge
    filled = Counter(r.uri.split("/v/")[1].split("/")[0] for r in run.fills())
    assert {"p0", "p1", "p2"} <= set(filled)  # each prefix filled from the bucket ...
    stored = sum(o.size for o in store.list("v/"))
    assert sum(r.body_bytes for r in run.fills()) == stored  # ... once, for both readers
    served = [r for r in settled(run.edge.requests) if "/v/p" in r.uri]
    assert sum(r.body_bytes for r in served) >= 2 * sum(spread.values())
