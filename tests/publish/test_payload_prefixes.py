"""Payload dealt over K prefixes (``PublishConfig.payload_prefixes``), read bit for bit.

The publisher puts object n of version v under ``v/p<(v + n) mod K>/<v>/``; the manifest
(schema 2) names each object's prefix; readers, the visibility check, the sharded commit
and gc find the objects there, and versions published with one prefix (schema 1, in the
version's own directory) stay readable beside them, chains mixing the two included.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pytest

from tests.publish.test_shard import assert_bit_exact, model, publish_all
from wanrl_s3 import PublishConfig, Publisher, ShardedPublisher, Subscriber, open_store
from wanrl_s3.errors import UsageError
from wanrl_s3.fleet.retention import RetentionPolicy, collect
from wanrl_s3.format import layout
from wanrl_s3.store import ObjectStore
from wanrl_s3.testing import nudge_state, random_bf16_state

State = dict[str, np.ndarray]
SPREAD = re.compile(r"^v/p(\d+)/(\d{12})/[0-9a-f]{12}/\d{6}\.bin$")


def policy(seed: int = 0) -> State:
    return random_bf16_state([(f"layer.{i}.w", (3000,)) for i in range(6)], seed=seed)


def config(prefixes: int, **kw: object) -> PublishConfig:
    return PublishConfig(object_bytes=4096, full_coding="raw", payload_prefixes=prefixes, **kw)  # type: ignore[arg-type]


def payload_prefixes_of(store: ObjectStore, version: int) -> Counter[int]:
    """How many of ``version``'s payload objects lie under each prefix; -1: its own directory."""
    found: Counter[int] = Counter()
    for o in store.list("v/"):
        m = SPREAD.match(o.key)
        if m and int(m.group(2)) == version:
            found[int(m.group(1))] += 1
        elif o.key.startswith(layout.version_dir(version) + "/") and o.key.endswith(".bin"):
            found[-1] += 1
    return found


def pulled(store: ObjectStore, version: int, have: object = None) -> State:
    with Subscriber(store) as sub:
        return dict(sub.fetch(version, have=have).tensors)  # type: ignore[arg-type]


def test_objects_are_dealt_over_the_prefixes_and_pull_bit_exact(store: ObjectStore) -> None:
    v1 = policy(1)
    v2 = nudge_state(v1, 0.3, seed=2)
    publisher = Publisher(store, config(4, delta="always"))
    publisher.publish(v1, 1)
    publisher.publish(v2, 2)
    with Subscriber(store) as sub:
        full, delta = sub.manifest(1), sub.manifest(2)
        assert sub.missing(2, None) is None and sub.missing(2, 1) is None
        have = sub.fetch(1)
        assert_bit_exact(dict(have.tensors), v1)
        assert_bit_exact(dict(sub.fetch(2, have=have).tensors), v2)  # the delta alone
    assert_bit_exact(pulled(store, 2), v2)  # keyframe and delta
    # object n of version v under prefix (v + n) mod 4: all four prefixes, evenly
    assert [o.prefix for o in full.objects] == [(1 + n) % 4 for n in range(len(full.objects))]
    assert [o.prefix for o in delta.objects] == [(2 + n) % 4 for n in range(len(delta.objects))]
    spread = payload_prefixes_of(store, 1)
    assert sorted(spread) == [0, 1, 2, 3] and max(spread.values()) - min(spread.values()) <= 1
    assert payload_prefixes_of(store, 2)[-1] == 0  # nothing in the version's own directory
    assert [o.key for o in store.list("v/000000000001/")] == ["v/000000000001/manifest.json"]
    stored = json.loads(store.get_bytes(layout.manifest_key(1)))
    assert stored["schema_version"] == 2 and stored["objects"][0]["prefix"] == 1


def test_one_prefix_is_the_layout_and_schema_every_reader_knows(store: ObjectStore) -> None:
    Publisher(store, config(1)).publish(policy(3), 1)
    assert set(payload_prefixes_of(store, 1)) == {-1}
    stored = json.loads(store.get_bytes(layout.manifest_key(1)))
    assert stored["schema_version"] == 1
    assert all(set(o) == {"key", "size"} for o in stored["objects"])


def test_a_chain_across_both_layouts_is_read_whole(store: ObjectStore) -> None:
    """Versions published before the change stay readable beside spread ones: a reader
    holding nothing reads a keyframe in its own directory and deltas spread over prefixes."""
    v1 = policy(4)
    v2 = nudge_state(v1, 0.2, seed=5)
    v3 = nudge_state(v2, 0.2, seed=6)
    before = Publisher(store, config(1, delta="always"))
    before.publish(v1, 1)
    before.publish(v2, 2)
    after = Publisher(store, config(3, delta="always"))
    with Subscriber(store) as sub:
        m2 = sub.manifest(2)
        after.adopt_base(2, v2, keyframe_version=1, since_keyframe=1, manifest_hash=m2.digest)
    after.publish(v3, 3)
    assert set(payload_prefixes_of(store, 1)) == {-1} and -1 not in payload_prefixes_of(store, 3)
    with Subscriber(store) as sub:
        assert [m.kind for m in sub.plan(3).steps] == ["full", "delta", "delta"]
        assert sub.missing(3) is None
    assert_bit_exact(pulled(store, 3), v3)


def test_a_missing_object_under_a_prefix_keeps_the_version_invisible(store: ObjectStore) -> None:
    Publisher(store, config(2)).publish(policy(7), 1)
    gone = next(o.key for o in store.list("v/p1/"))
    data = store.get_bytes(gone)
    store.delete([gone])
    with Subscriber(store) as sub:
        missing = sub.missing(1)
        assert missing is not None and gone in missing
        store.put_bytes(gone, data)
        assert sub.missing(1) is None


def test_gc_collects_spread_payload_and_keeps_retained_chains_whole(store: ObjectStore) -> None:
    states = [policy(8)]
    for seed in range(9, 13):
        states.append(nudge_state(states[-1], 0.2, seed=seed))
    publisher = Publisher(store, config(3, keyframe_every=2))
    for version, state in enumerate(states, start=1):
        publisher.publish(state, version)  # keyframes 1, 3, 5; deltas 2, 4
    orphan = layout.payload_key(9, "0123456789ab/000000.bin", 2)  # a publish that crashed
    store.put_bytes(orphan, b"x" * 10)
    report = collect(store, RetentionPolicy(keep_versions=2, grace_s=60.0), now_s=9e9)
    assert report.kept_versions == [3, 4, 5] and report.deleted_versions == [1, 2]
    assert report.orphan_objects == 1 and not store.exists(orphan)
    for version in (1, 2):
        assert not payload_prefixes_of(store, version)  # every prefix's objects, not one
    for version in (3, 4, 5):
        assert sum(payload_prefixes_of(store, version).values()) > 0
    assert_bit_exact(pulled(store, 4), states[3])
    assert_bit_exact(pulled(store, 5), states[4])


def test_ranks_of_one_version_start_on_different_prefixes(s3_url: str, s3_endpoint: str) -> None:
    kw = {"ranks": 3, "run_id": "job-a", "poll_s": 0.05, "timeout_s": 60.0}
    stores = [open_store(s3_url, endpoint_url=s3_endpoint) for _ in range(3)]
    pubs = [ShardedPublisher(s, config(2), rank=r, **kw) for r, s in enumerate(stores)]  # type: ignore[arg-type]
    state = model()
    publish_all(pubs, state, 1)
    store = pubs[0].store
    with Subscriber(store) as sub:
        m = sub.manifest(1)
        assert sub.missing(1) is None
    firsts = {o.key.split("/")[0]: o.prefix for o in reversed(m.objects)}  # each share's first
    assert sorted(firsts.values()) == [0, 1, 1]  # (1 + rank) mod 2 for ranks 0, 1, 2
    assert_bit_exact(pulled(store, 1), state)


@pytest.mark.parametrize("bad", [0, 257, True, 2.0])
def test_a_prefix_count_out_of_range_is_refused(bad: object) -> None:
    with pytest.raises(UsageError, match="payload_prefixes"):
        PublishConfig(payload_prefixes=bad)  # type: ignore[arg-type]
