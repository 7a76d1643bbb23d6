"""No upload is reported as written before the service is shown to hold the bytes sent.

moto validates no upload checksum (test_upload_checksums.py proves it), so a
byte flipped by a FaultProxy inside a part's body is stored. The first object
of a fresh process may be multipart, before any plain upload has shown what the
service's ETags are: the part is still caught and sent again. Where the ETags
are not MD5s (AWS with SSE-KMS), the completed object's unconfirmed parts are
read back; damage there refuses the object rather than committing it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from wanrl_s3 import PublishConfig, Publisher, Subscriber
from wanrl_s3.errors import StoreError
from wanrl_s3.store import MIN_PART_BYTES, ObjectStore, open_store, s3_confirm
from wanrl_s3.store.checksums import CHECKSUM_ALGORITHM
from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket

MiB = 2**20
PART = r"\.bin$"  # payload objects: with 5 MiB parts, every one of these is multipart


def _flip_first(key: str = PART) -> Rule:
    return Rule(Fault.FLIP_REQUEST, method="PUT", key=key, min_body_bytes=MiB, count=1)


def test_a_part_flipped_before_any_etag_was_seen_is_sent_again_not_committed(
    moto_endpoint: str,
) -> None:
    """A fresh process whose first object is multipart: publish, pull, bit-exact."""
    url = f"s3://{make_bucket(moto_endpoint)}/run"
    rng = np.random.default_rng(5)
    weights = {f"w{i}": rng.standard_normal(3 * MiB // 4).astype(np.float32) for i in range(4)}
    config = PublishConfig(delta="never", part_bytes=5 * MiB, concurrency=4)
    with FaultProxy(moto_endpoint, seed=3, rules=[_flip_first()]) as proxy:
        store = open_store(url, endpoint_url=proxy.url)
        Publisher(store, config).publish(weights, 1)
        assert proxy.counts[Fault.FLIP_REQUEST] == 1
    with Subscriber(open_store(url, endpoint_url=moto_endpoint)) as sub:
        got = sub.fetch("latest")
    assert {n: a.tobytes() for n, a in got.tensors.items()} == {
        n: a.tobytes() for n, a in weights.items()
    }


def _write(store: ObjectStore, key: str, data: bytes) -> None:
    pool = ThreadPoolExecutor(2)
    with pool, store.open_writer(key, pool, part_bytes=MIN_PART_BYTES) as writer:
        writer.write(data)
        writer.close()


@pytest.fixture
def opaque(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ObjectStore, FaultProxy, ObjectStore]]:
    """A service whose ETags are not MD5s of the bytes (AWS with SSE-KMS), which the store
    has learned: no ETag confirms anything. The store through a proxy, and the same bucket
    reached directly."""
    monkeypatch.setattr(s3_confirm, "same_md5", lambda etag, md5: False)
    url = f"s3://{make_bucket(moto_endpoint)}/run"
    with FaultProxy(moto_endpoint) as proxy:
        store = open_store(url, endpoint_url=proxy.url)
        store._confirm.etag_is_md5 = False  # type: ignore[attr-defined]
        yield store, proxy, open_store(url, endpoint_url=moto_endpoint)


def test_without_md5_etags_a_multipart_object_is_read_back_once(
    opaque: tuple[ObjectStore, FaultProxy, ObjectStore],
) -> None:
    store, proxy, direct = opaque
    data = os.urandom(MIN_PART_BYTES + MiB)
    _write(store, "a.bin", data)
    assert 0 <= proxy.response_bytes - len(data) < 64 * 1024  # its bytes once, and XML answers
    assert direct.get_bytes("a.bin") == data


def test_without_md5_etags_a_damaged_part_is_refused_and_the_object_removed(
    opaque: tuple[ObjectStore, FaultProxy, ObjectStore],
) -> None:
    store, proxy, direct = opaque
    proxy.set_rules([_flip_first()])
    with pytest.raises(StoreError, match="stored other bytes than were sent in part"):
        _write(store, "a.bin", os.urandom(MIN_PART_BYTES + MiB))
    assert proxy.counts[Fault.FLIP_REQUEST] == 1
    assert direct.head("a.bin") is None and direct.pending_uploads() == []


def test_without_md5_etags_a_damaged_plain_upload_is_sent_again(
    opaque: tuple[ObjectStore, FaultProxy, ObjectStore],
) -> None:
    store, proxy, direct = opaque
    proxy.set_rules([_flip_first()])
    data = os.urandom(2 * MiB)
    store.put_bytes("p.bin", data, if_none_match=True)
    assert proxy.counts[Fault.FLIP_REQUEST] == 1
    assert direct.get_bytes("p.bin") == data


def test_a_fresh_store_learns_from_its_first_part_that_etags_are_not_md5s(
    opaque: tuple[ObjectStore, FaultProxy, ObjectStore],
) -> None:
    """What finding out costs, once per store: its first part sent twice, then read-backs."""
    store, proxy, direct = opaque
    store._confirm.etag_is_md5 = None  # type: ignore[attr-defined]
    data = os.urandom(2 * MIN_PART_BYTES + MiB)
    _write(store, "a.bin", data)
    assert store._confirm.etag_is_md5 is False  # type: ignore[attr-defined]
    assert proxy.repeats == 1  # one part sent again, once
    assert 0 <= proxy.response_bytes - len(data) < 64 * 1024  # and the object read back
    assert direct.get_bytes("a.bin") == data


def _echo_what_was_sent(store: ObjectStore) -> None:
    """Make ``store``'s service answer each upload with the checksum it was sent, unchecked:
    a service that stores the header and returns it (no server here does: moto returns
    none, SeaweedFS refuses a mismatch), emulated in the client's answer parsing."""

    def remember(params: dict, context: dict, **_: object) -> None:
        checksum = params["headers"].get("x-amz-checksum-crc32c") or params["headers"].get(
            "x-amz-checksum-crc32"
        )
        if checksum:
            context["sent_checksum"] = checksum

    def echo(parsed: dict, context: dict, **_: object) -> None:
        if "sent_checksum" in context:
            parsed[f"Checksum{CHECKSUM_ALGORITHM}"] = context["sent_checksum"]

    events = store._client.meta.events  # type: ignore[attr-defined]
    for op in ("PutObject", "UploadPart"):
        events.register(f"before-call.s3.{op}", remember)
        events.register(f"after-call.s3.{op}", echo)


@pytest.mark.parametrize("how", ["plain", "multipart"])
def test_an_echoed_checksum_confirms_nothing_from_a_service_that_does_not_check(
    moto_endpoint: str, how: str
) -> None:
    """The echo is trusted only from a service seen to refuse a wrong checksum: here the
    probe's wrong checksum is stored, so the flipped body is caught by its MD5 ETag."""
    url = f"s3://{make_bucket(moto_endpoint)}/run"
    with FaultProxy(moto_endpoint, seed=4, rules=[_flip_first(r"\.bin$")]) as proxy:
        store = open_store(url, endpoint_url=proxy.url)
        _echo_what_was_sent(store)
        data = os.urandom(MIN_PART_BYTES + MiB)
        if how == "plain":
            store.put_bytes("a.bin", data)
        else:
            _write(store, "a.bin", data)
        assert proxy.counts[Fault.FLIP_REQUEST] == 1
    direct = open_store(url, endpoint_url=moto_endpoint)
    assert direct.get_bytes("a.bin") == data
    assert store._confirm.checks_checksums is False  # type: ignore[attr-defined]
    assert [o.key for o in direct.list()] == ["a.bin"]  # the probe's object removed


def test_an_echoed_checksum_confirms_an_upload_where_the_service_checks(
    s3_url: str, s3_endpoint: str
) -> None:
    """SeaweedFS refuses the probe's wrong checksum, so its echoes confirm: no MD5 needed."""
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    store.put_bytes("a.bin", b"x" * 1000)
    assert store._confirm.checks_checksums is True  # type: ignore[attr-defined]
    assert store._confirm.etag_is_md5 is None  # type: ignore[attr-defined]  (no MD5 compared)
    assert [o.key for o in store.list()] == ["a.bin"]
