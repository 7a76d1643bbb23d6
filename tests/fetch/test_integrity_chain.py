"""The integrity chain: LATEST pins the newest manifest, each delta pins its base's.

Tensor hashes cover bytes only; without the chain, an edit of a tensor's name,
dtype or shape in a manifest, or a delta made for another base, would install
silently when signatures are off.
"""

from __future__ import annotations

import json
import uuid

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import ManifestError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing.synthetic import nudge_state

CONFIG = PublishConfig(delta="always", keyframe_every=10)


def _run(store: ObjectStore, seed: int, versions: int = 3) -> None:
    rng = np.random.default_rng(seed)
    state = {n: rng.standard_normal(4096).astype(ml_dtypes.bfloat16) for n in ("a", "b")}
    pub = Publisher(store, CONFIG, run_id=f"run-{seed}")
    for v in range(1, versions + 1):
        pub.publish(state, v)
        state = nudge_state(state, 0.02, seed=seed * 100 + v)


def _edit_manifest(store: ObjectStore, version: int, edit) -> None:  # type: ignore[no-untyped-def]
    key = layout.manifest_key(version)
    d = json.loads(store.get_bytes(key))
    edit(d)
    store.delete([key])
    store.put_bytes(key, json.dumps(d).encode())


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["tensors"][0].update(name="renamed"),
        lambda d: d["tensors"][0].update(dtype="F16"),
        lambda d: d["tensors"][0].update(shape=[64, 64]),
        lambda d: d["metadata"].update(step="999"),
    ],
    ids=["name", "dtype", "shape", "metadata"],
)
@pytest.mark.parametrize("version", [3, 1], ids=["newest", "base-of-the-chain"])
def test_an_edited_manifest_never_installs(edit, version: int) -> None:  # type: ignore[no-untyped-def]
    store = open_store(f"memory://{uuid.uuid4().hex}")
    _run(store, seed=1)
    with Subscriber(store) as sub:
        assert sub.fetch("latest").version == 3  # the untouched run installs
    _edit_manifest(store, version, edit)
    with Subscriber(store) as sub, pytest.raises(ManifestError, match="is not the one"):
        sub.fetch("latest")


def test_a_delta_made_for_another_base_is_refused() -> None:
    """Mix and match: run 2's v2 delta (its base is run 2's v1) put in run 1's store."""
    ours, theirs = (open_store(f"memory://{uuid.uuid4().hex}") for _ in range(2))
    _run(ours, seed=1, versions=1)
    _run(theirs, seed=2, versions=2)
    for info in theirs.list(layout.version_dir(2)):
        ours.put_bytes(info.key, theirs.get_bytes(info.key))
    with Subscriber(ours) as sub, pytest.raises(ManifestError, match="is not the one"):
        sub.fetch(2)


def test_the_newest_version_asked_for_by_number_is_pinned_too() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}")
    _run(store, seed=3)
    _edit_manifest(store, 3, lambda d: d["tensors"][0].update(shape=[64, 64]))
    with Subscriber(store) as sub, pytest.raises(ManifestError, match="is not the one"):
        sub.fetch(3)


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_version_on_latests_chain_asked_for_by_number_is_pinned(version: int) -> None:
    """The fault campaign's finding: an edited keyframe pulled with --version 1 installed."""
    store = open_store(f"memory://{uuid.uuid4().hex}")
    _run(store, seed=4)
    _edit_manifest(store, version, lambda d: d["tensors"][0].update(shape=[64, 64]))
    with Subscriber(store) as sub, pytest.raises(ManifestError, match="is not the one"):
        sub.fetch(version)


class _CountingStore:
    """Counts GETs of LATEST on a memory store (its ``_get`` primitive)."""

    def __init__(self, store: ObjectStore) -> None:
        self.latest_reads = 0
        original = store._get  # type: ignore[attr-defined]

        def counted(key: str, **kwargs):  # type: ignore[no-untyped-def]
            self.latest_reads += key.endswith(layout.LATEST_KEY)
            return original(key, **kwargs)

        store._get = counted  # type: ignore[attr-defined]


def test_the_version_a_poll_just_found_is_fetched_without_reading_latest_again() -> None:
    """A watcher polls LATEST, then fetches that version by number: one LATEST read, not
    two (a round trip per version), and the poll's pin still refuses an edited manifest."""
    store = open_store(f"memory://{uuid.uuid4().hex}")
    _run(store, seed=5)
    counter = _CountingStore(store)
    with Subscriber(store) as sub:
        polled = sub.poll_latest(None)
        assert polled is not None and polled[0].version == 3
        assert sub.fetch(3).version == 3
    assert counter.latest_reads == 1
    _edit_manifest(store, 3, lambda d: d["tensors"][0].update(shape=[64, 64]))
    with Subscriber(store) as sub, pytest.raises(ManifestError, match="is not the one"):
        sub.poll_latest(None)
        sub.fetch(3)
