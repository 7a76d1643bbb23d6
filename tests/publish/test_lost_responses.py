"""Invariant 9: a conditional write whose response is lost is resolved by reading back.

The fault is injected where a retrying client meets it: the request reached the
store and acted, the response never came back (TransientStoreError), and the
retry layer sends the same request again, which now fails its own precondition.
"""

from __future__ import annotations

import uuid

import numpy as np

from wanrl_s3.errors import TransientStoreError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fleet.retention import RetentionPolicy, collect
from wanrl_s3.format import latest, layout
from wanrl_s3.format.manifest import Manifest
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import FakeClock, RetryPolicy
from wanrl_s3.store.memory import MemoryStore


class LoseResponses(MemoryStore):
    """Acts on each matching write, then loses its response once per key."""

    def __init__(self, suffixes: tuple[str, ...]) -> None:
        super().__init__(uuid.uuid4().hex, retry=RetryPolicy(clock=FakeClock()))
        self.suffixes, self.lost = suffixes, []

    def _put(self, key: str, data: bytes, **cond: object) -> str:  # type: ignore[override]
        etag = super()._put(key, data, **cond)  # type: ignore[arg-type]
        if key.endswith(self.suffixes) and key not in self.lost:
            self.lost.append(key)
            raise TransientStoreError(f"connection reset after PUT {key} was applied")
        return etag


def _weights(v: int) -> dict[str, np.ndarray]:
    return {"w": np.arange(1024, dtype=np.float32) * v}


def test_a_lost_manifest_response_is_our_commit_not_a_conflict() -> None:
    store = LoseResponses((layout.MANIFEST_NAME, layout.LATEST_KEY))
    pub = Publisher(store, PublishConfig(delta="never"))
    result = pub.publish(_weights(1), 1)
    assert len(store.lost) == 2  # the manifest's and LATEST's responses were both lost
    assert result.version == 1 and result.latest_moved
    with Subscriber(store) as sub:
        assert sub.fetch("latest").tensors["w"].tobytes() == _weights(1)["w"].tobytes()


def test_no_path_deletes_payload_that_a_committed_manifest_references() -> None:
    store = LoseResponses((layout.MANIFEST_NAME,))
    Publisher(store, PublishConfig(delta="never")).publish(_weights(2), 2)
    m = Manifest.from_json(store.get_bytes(layout.manifest_key(2)))
    assert all(store.exists(m.payload_key(o.key)) for o in m.objects)


def test_gc_counts_from_the_served_version() -> None:
    """A publisher killed after its v2 manifest, before LATEST moved: LATEST stays at v1."""
    store = MemoryStore(uuid.uuid4().hex)
    pub = Publisher(store, PublishConfig(delta="auto"))
    pub.publish(_weights(1), 1)
    m1 = Manifest.from_json(store.get_bytes(layout.manifest_key(1)))
    pub.publish(_weights(2), 2)
    store.put_bytes(layout.LATEST_KEY, latest.Latest.of(m1).to_json())  # as if killed before
    report = collect(store, RetentionPolicy(keep_versions=1, grace_s=0.0))
    assert report.deleted_versions == []
    assert set(report.kept_versions) == {1, 2}
    with Subscriber(store) as sub:
        assert sub.fetch("latest").version == 1  # still pullable
        assert sub.fetch(2).version == 2  # and the next one survives for LATEST to reach


def test_gc_keeps_what_a_rolled_back_pointer_serves() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    pub = Publisher(store, PublishConfig(delta="never"))
    for v in (1, 2, 3):
        pub.publish(_weights(v), v)
    m2 = Manifest.from_json(store.get_bytes(layout.manifest_key(2)))
    store.put_bytes(layout.LATEST_KEY, latest.Latest.of(m2).to_json())
    report = collect(store, RetentionPolicy(keep_versions=1, grace_s=0.0))
    assert report.kept_versions == [2, 3] and report.deleted_versions == [1]
    with Subscriber(store) as sub:
        assert sub.fetch("latest").version == 2
