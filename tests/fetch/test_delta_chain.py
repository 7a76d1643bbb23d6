"""Deltas through the store: keyframes, chains, joining at every version, wrong bases."""

from __future__ import annotations

import time
import uuid

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import VerificationError
from wanrl_s3.fetch.chain import plan_fetch
from wanrl_s3.fetch.subscriber import Snapshot, Subscriber
from wanrl_s3.fleet.retention import RetentionPolicy, collect
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import Blob, ObjectStore, open_store
from wanrl_s3.store.memory import MemoryStore


def step(
    state: dict[str, np.ndarray], rng: np.random.Generator, density: float
) -> dict[str, np.ndarray]:
    """Flip low mantissa bits of a random ``density`` of each tensor's elements."""
    out = {}
    for name, arr in state.items():
        bits = arr.view(np.uint16 if arr.dtype.itemsize == 2 else np.uint32).copy()
        mask = rng.random(bits.shape) < density
        bits[mask] ^= rng.integers(1, 4, size=int(mask.sum()), dtype=bits.dtype)
        out[name] = bits.view(arr.dtype)
    return out


def initial(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "embed": rng.standard_normal((64, 32)).astype(ml_dtypes.bfloat16),
        "layers.0.w": rng.standard_normal((32, 32)).astype(ml_dtypes.bfloat16),
        "norm": rng.standard_normal(32).astype(np.float32),
    }


def same(a: Snapshot | dict, b: dict[str, np.ndarray]) -> bool:
    ta = a.tensors if isinstance(a, Snapshot) else a
    return set(ta) == set(b) and all(ta[k].tobytes() == b[k].tobytes() for k in b)


@pytest.fixture
def chain20(store: ObjectStore) -> list[dict[str, np.ndarray]]:
    """20 published versions, keyframe every 6, one version of all-new values (v11)."""
    rng = np.random.default_rng(7)
    pub = Publisher(store, PublishConfig(keyframe_every=6))
    versions, state = [], initial(rng)
    for v in range(1, 21):
        state = initial(rng) if v == 11 else step(state, rng, 0.01)  # v11: all new values
        pub.publish(state, v)
        versions.append(state)
    return versions


def test_kinds_follow_the_keyframe_rule(store: ObjectStore, chain20: list) -> None:
    with Subscriber(store) as sub:
        kinds = {v: sub.manifest(v).kind for v in range(1, 21)}
    assert [v for v, k in kinds.items() if k == "full"] == [1, 7, 11, 17]  # v11 was too dense
    assert sub.manifest(10).base_version == 9 and sub.manifest(10).keyframe_version == 7
    assert sub.manifest(3).stored_bytes < 0.05 * sub.manifest(3).raw_bytes


def test_join_at_every_version_reaches_every_later_one(store: ObjectStore, chain20: list) -> None:
    with Subscriber(store) as sub:
        held = {0: None} | {v: sub.fetch(v) for v in range(1, 21)}
        for v in range(1, 21):
            assert same(held[v], chain20[v - 1]), v
        for have in range(0, 21, 3):
            for target in range(max(have, 1), 21, 4):
                got = sub.fetch(target, have=held[have])
                assert same(got, chain20[target - 1]), (have, target)
        # deltas decode from the held copy into new memory: the held copy is untouched
        assert all(same(held[v], chain20[v - 1]) for v in range(1, 21))


def test_planner_takes_the_cheapest_path(store: ObjectStore, chain20: list) -> None:
    with Subscriber(store) as sub:
        from_15 = sub.plan(20, 15)
        assert [m.version for m in from_15.steps] == [16, 17, 18, 19, 20] or [
            m.version for m in from_15.steps
        ] == [17, 18, 19, 20]
        # v17 is a keyframe: from 15, going through it costs a full download either way,
        # so the plan from the held copy must not cost more than the keyframe plan.
        assert from_15.download_bytes <= sub.plan(20, None).download_bytes
        from_18 = sub.plan(20, 18)
        assert [m.version for m in from_18.steps] == [19, 20]
        assert from_18.download_bytes < 0.1 * sub.plan(20, None).download_bytes
        assert sub.plan(20, 20).download_bytes == 0


def test_wrong_base_is_detected_and_recovered(store: ObjectStore, chain20: list) -> None:
    with Subscriber(store) as sub:
        v19 = sub.fetch(19)
        forged = Snapshot(
            19,
            {
                k: (a.copy() if k != "embed" else step({k: a}, np.random.default_rng(0), 0.5)[k])
                for k, a in v19.tensors.items()
            },
        )
        plan = sub.plan(20, 19)
        with pytest.raises(VerificationError, match="wrong base"):
            sub._materialize(
                plan, forged, lambda e: np.empty(e.shape, v19.tensors[e.name].dtype), None, None
            )
        recovered = sub.fetch(20, have=forged)  # falls back to the keyframe path
        assert same(recovered, chain20[19]) and recovered.path[0] == 17


def test_corrupted_delta_payload_never_installs(store: ObjectStore, chain20: list) -> None:
    with Subscriber(store) as sub:
        m = sub.manifest(20)
        key = m.payload_key(m.objects[0].key)
        data = bytearray(store.get_bytes(key))
        data[-1] ^= 0xFF
        store.put_bytes(key, bytes(data))
        v19 = sub.fetch(19)
        seen: list[str] = []
        with pytest.raises(VerificationError):
            sub.stream(lambda name, arr: seen.append(name), 20, have=v19)
        assert seen == []


def test_gc_keeps_every_retained_chain_whole(store: ObjectStore, chain20: list) -> None:
    report = collect(store, RetentionPolicy(keep_versions=2, grace_s=0))
    assert report.kept_versions == [17, 18, 19, 20]  # 19 and 20 need 18 and keyframe 17
    with Subscriber(store) as sub:
        assert sub.versions() == [17, 18, 19, 20]
        assert same(sub.fetch(20), chain20[19])
        assert not store.exists(layout.manifest_key(16))


def test_restarted_publisher_adopts_its_base(tmp_path) -> None:
    store = open_store(f"file://{tmp_path}/s")
    rng = np.random.default_rng(3)
    v1 = initial(rng)
    Publisher(store).publish(v1, 1)
    with Subscriber(store) as sub:
        held = sub.fetch(1)
        fresh = Publisher(store, keep_base=False)
        fresh.adopt_base(1, held.tensors, keyframe_version=1, since_keyframe=0, borrow=True)
        v2 = step(v1, rng, 0.01)
        result = fresh.publish(v2, 2)
        assert result.kind == "delta" and result.base_version == 1
        assert same(sub.fetch(2, have=held), v2)


def test_plan_from_unknown_version_uses_keyframe(store: ObjectStore, chain20: list) -> None:
    with Subscriber(store) as sub:
        plan = plan_fetch(sub.manifest(20), sub.manifest, have_version=999)
        assert plan.have_version is None and plan.steps[0].kind == "full"


class SlowManifests(MemoryStore):
    """A memory store whose manifest reads take 50 ms each, recording when each ran."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.reads: list[tuple[float, float]] = []

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        if not key.endswith("manifest.json"):
            return super()._get(key, if_none_match=if_none_match, max_read_bytes=max_read_bytes)
        start = time.monotonic()
        time.sleep(0.05)
        blob = super()._get(key, if_none_match=if_none_match, max_read_bytes=max_read_bytes)
        self.reads.append((start, time.monotonic()))
        return blob


def test_a_fresh_reader_fetches_a_chains_manifests_together() -> None:
    """Planning 9 deltas past a keyframe: the manifests overlap in time, not one by one."""
    name = f"chain-{uuid.uuid4().hex}"
    rng = np.random.default_rng(3)
    pub = Publisher(open_store(f"memory://{name}"), PublishConfig(keyframe_every=10))
    versions, state = [], initial(rng)
    for v in range(1, 11):
        state = step(state, rng, 0.01)
        pub.publish(state, v)
        versions.append(state)
    store = SlowManifests(name)
    with Subscriber(store) as sub:
        got = sub.fetch(10, have=None)
    assert same(got, versions[-1])
    assert len(store.reads) == 10
    most_at_once = max(sum(s < t < e for s, e in store.reads) for t, _ in store.reads)
    assert most_at_once >= 4, store.reads  # one by one, no read would overlap another
