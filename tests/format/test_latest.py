"""LATEST has one owner (wanrl_s3.format.latest) and one policy; these tests pin it."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from wanrl_s3.errors import ManifestError, PreconditionFailedError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import latest, layout
from wanrl_s3.format.manifest import Manifest
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.store.memory import MemoryStore
from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket


def _publish(store: ObjectStore, version: int, run_id: str = "run-a") -> Manifest:
    weights = {"w": np.arange(64, dtype=np.float32) + version}
    Publisher(store, PublishConfig(delta="never"), run_id=run_id).publish(weights, version)
    return Manifest.from_json(store.get_bytes(layout.manifest_key(version)))


def test_readers_refuse_a_corrupt_pointer_and_writers_repair_it(store: ObjectStore) -> None:
    m1 = _publish(store, 1)
    store.put_bytes(layout.LATEST_KEY, b"{not json")
    with pytest.raises(ManifestError, match="LATEST"):
        latest.read(store)
    with Subscriber(store) as sub, pytest.raises(ManifestError):
        sub.latest()
    assert latest.committed_version(store)[0] == -1
    assert latest.advance(store, m1)  # the verified manifest overwrites the corrupt pointer
    found = latest.read(store)
    assert found is not None and found.version == 1


def test_absent_pointer_reads_as_none() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}")
    assert latest.read(store) is None
    assert latest.poll(store, None) is None
    assert latest.committed_version(store) == (-1, None)


@pytest.mark.parametrize("depth", [33, 30_000])
def test_deeply_nested_json_is_a_manifest_error_not_a_crash(depth: int) -> None:
    data = b"[" * depth + b"]" * depth
    with pytest.raises(ManifestError, match="nests deeper"):
        latest.Latest.from_json(data)
    deeper = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(ManifestError, match="nests deeper"):
        Manifest.from_json(b'{"format": ' + deeper + b"}")


def test_oversized_pointer_is_refused_before_parsing() -> None:
    with pytest.raises(ManifestError, match="over the"):
        latest.Latest.from_json(b" " * (latest.MAX_LATEST_BYTES + 1))


class LostResponseStore(MemoryStore):
    """The first conditional write to LATEST reaches the store, then its response is lost.

    What a retrying client sees then: its re-sent request fails the precondition
    that its own first attempt changed.
    """

    lost = 0

    def _put(self, key: str, data: bytes, **cond: object) -> str:  # type: ignore[override]
        etag = super()._put(key, data, **cond)  # type: ignore[arg-type]
        if key.endswith(layout.LATEST_KEY) and self.lost == 0:
            self.lost += 1
            raise PreconditionFailedError("412 on the retry of a write that succeeded")
        return etag


def test_a_lost_response_to_a_successful_compare_and_swap_is_a_success() -> None:
    store = LostResponseStore(uuid.uuid4().hex)
    m = _publish(open_store(f"memory://{uuid.uuid4().hex}"), 1)  # a manifest to point at
    assert latest.advance(store, m)
    assert store.lost == 1
    found = latest.read(store)
    assert found is not None and (found.version, found.run_id) == (1, m.run_id)


def test_the_same_version_of_another_run_is_not_ours(store: ObjectStore) -> None:
    mine = _publish(store, 1, run_id="run-a")
    other = json.loads(latest.Latest.of(mine).to_json())
    other["run_id"] = "run-b"
    store.put_bytes(layout.LATEST_KEY, json.dumps(other).encode())
    assert not latest.advance(store, mine)


def _flipped_latest_reads(s3_endpoint: str, count: int) -> tuple[str, FaultProxy]:
    url = f"s3://{make_bucket(s3_endpoint)}/run"
    rule = Rule(Fault.FLIP_RESPONSE, method="GET", key=r"/LATEST$", count=count)
    return url, FaultProxy(s3_endpoint, rules=[rule])


def test_a_pointer_damaged_in_transit_is_read_again(s3_endpoint: str) -> None:
    """A flipped LATEST body must not read as "no version": a writer would then move a
    newer pointer backwards, and a reader would fail a pull a second read serves."""
    flips = 2  # every read but the last of each call is damaged
    assert flips <= latest.REREADS
    url, proxy = _flipped_latest_reads(s3_endpoint, count=flips)
    _publish(open_store(url, endpoint_url=s3_endpoint), 3)
    with proxy:
        store = open_store(url, endpoint_url=proxy.url)
        assert latest.committed_version(store)[0] == 3
        proxy.set_rules([Rule(Fault.FLIP_RESPONSE, method="GET", key=r"/LATEST$", count=flips)])
        found = latest.read(store)
        # each damaged read was read again; a flip inside a string value (a digit of a
        # time, a letter of a run id) can leave a pointer that still parses, which needs
        # no second read, so at least one flip hit this read, and at most all of them
        assert flips + 1 <= proxy.counts[Fault.FLIP_RESPONSE] <= 2 * flips
    assert found is not None and found.version == 3


def test_a_corrupt_pointer_is_reported_once_until_repaired(
    store: ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    m1 = _publish(store, 1)
    latest._WARNED.discard(store.url)
    for garbage in (b"{not json", b"[also not a pointer]"):  # two corrupt pointers, one episode
        store.put_bytes(layout.LATEST_KEY, garbage)
        with caplog.at_level("WARNING", logger=latest.__name__):
            assert latest.committed_version(store)[0] == -1
            assert latest.committed_version(store)[0] == -1
    assert len([r for r in caplog.records if "LATEST is corrupt" in r.message]) == 1
    assert latest.advance(store, m1)  # repaired
    assert latest.committed_version(store)[0] == 1
    store.put_bytes(layout.LATEST_KEY, b"{broken again")
    with caplog.at_level("WARNING", logger=latest.__name__):
        latest.committed_version(store)
    assert len([r for r in caplog.records if "LATEST is corrupt" in r.message]) == 2
