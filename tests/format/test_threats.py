"""The update-framework attacks, with signing on (docs/security.md lists each one).

Whoever can write the bucket must not be able to roll the fleet back, freeze it
unseen, mix versions of other runs in, or push unsigned bytes.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import ManifestError, SignatureError, VerificationError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.format.latest import Latest
from wanrl_s3.format.signing import Signer, Verifier, generate_keypair
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing.synthetic import nudge_state


@pytest.fixture
def pair() -> tuple[Signer, Verifier]:
    private, public = generate_keypair()
    return Signer(private), Verifier([public])


def _store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}")


def _publish(store: ObjectStore, signer: Signer, n: int, **cfg: object) -> list[bytes]:
    """Versions 1..n; returns each version's LATEST bytes as published."""
    rng = np.random.default_rng(0)
    state = {"w": rng.standard_normal(4096).astype(ml_dtypes.bfloat16)}
    pub = Publisher(store, PublishConfig(delta="always", **cfg), signer=signer)  # type: ignore[arg-type]
    pointers = []
    for v in range(1, n + 1):
        pub.publish(state, v)
        pointers.append(store.get_bytes(layout.LATEST_KEY))
        state = nudge_state(state, 0.02, seed=v)
    return pointers


def test_latest_is_signed_and_checked(pair) -> None:  # type: ignore[no-untyped-def]
    signer, verifier = pair
    store = _store()
    _publish(store, signer, 1)
    pointer = Latest.from_json(store.get_bytes(layout.LATEST_KEY))
    assert pointer.signature is not None and pointer.expires_at_s is not None
    with Subscriber(store, verifier=verifier) as sub:
        assert sub.fetch("latest").version == 1
    body = json.loads(store.get_bytes(layout.LATEST_KEY))
    for edit, needle in [
        (lambda d: d.pop("signature"), "not signed"),
        (lambda d: d.update(published_at="2030-01-01T00:00:00.000000Z"), "forged"),
    ]:
        d = dict(body)
        edit(d)
        store.put_bytes(layout.LATEST_KEY, json.dumps(d).encode())
        with (
            Subscriber(store, verifier=verifier) as sub,
            pytest.raises(SignatureError, match=needle),
        ):
            sub.fetch("latest")


def test_a_rolled_back_latest_is_not_followed(pair) -> None:  # type: ignore[no-untyped-def]
    signer, verifier = pair
    store = _store()
    pointers = _publish(store, signer, 3)
    with Subscriber(store, verifier=verifier) as sub:  # a worker: it has seen v3
        assert sub.fetch("latest").version == 3
        store.put_bytes(layout.LATEST_KEY, pointers[0])  # replay v1's signed pointer
        with pytest.raises(VerificationError, match="moved backwards from v3 to v1"):
            sub.latest()
        store.put_bytes(layout.LATEST_KEY, pointers[2])  # repaired: followed again
        assert sub.fetch("latest").version == 3


def test_a_frozen_latest_expires(pair) -> None:  # type: ignore[no-untyped-def]
    signer, verifier = pair
    store = _store()
    _publish(store, signer, 1, latest_expiry_s=0.3)
    time.sleep(0.5)  # the publisher stopped (or an old pointer is being served)
    with (
        Subscriber(store, verifier=verifier) as sub,
        pytest.raises(SignatureError, match="expired"),
    ):
        sub.fetch("latest")
    with Subscriber(store, verifier=verifier) as sub:
        assert sub.fetch(1).version == 1  # a version asked for by number still installs


def test_a_replayed_older_manifest_is_not_a_newer_version(pair) -> None:  # type: ignore[no-untyped-def]
    signer, verifier = pair
    store = _store()
    _publish(store, signer, 2)
    store.put_bytes(layout.manifest_key(5), store.get_bytes(layout.manifest_key(1)))
    with (
        Subscriber(store, verifier=verifier) as sub,
        pytest.raises(ManifestError, match="stored under version 5"),
    ):
        sub.fetch(5)


def test_a_signed_delta_for_another_runs_base_is_refused(pair) -> None:  # type: ignore[no-untyped-def]
    """Refused twice over: it belongs to another run, and it pins another base. The second
    holds even for a delta of this very run made against another base (a racing publisher
    of the run, say)."""
    signer, verifier = pair
    ours = _store()
    _publish(ours, signer, 1)
    rng = np.random.default_rng(7)
    other = {"w": rng.standard_normal(4096).astype(ml_dtypes.bfloat16)}
    for same_run in (False, True):
        theirs = _store()
        pub = Publisher(theirs, PublishConfig(delta="always"), signer=signer)
        pub.publish(other, 1)
        if same_run:  # their versions name our run: only the base pin tells them apart
            pub.origin_run_id = Latest.from_json(ours.get_bytes(layout.LATEST_KEY)).origin_run_id
        pub.publish(nudge_state(other, 0.02, seed=1), 2)
        for info in theirs.list(layout.version_dir(2)):
            ours.put_bytes(info.key, theirs.get_bytes(info.key))
        needle = "is not the one" if same_run else "belongs to run"
        with (
            Subscriber(ours, verifier=verifier) as sub,
            pytest.raises(VerificationError, match=needle),
        ):
            sub.fetch(2)


def test_key_rotation_with_a_keyring(tmp_path: Path) -> None:
    old_private, old_public = generate_keypair()
    new_private, new_public = generate_keypair()
    store = _store()
    _publish(store, Signer(old_private), 1)
    rng = np.random.default_rng(1)
    Publisher(store, PublishConfig(delta="never"), signer=Signer(new_private)).publish(
        {"w": rng.standard_normal(4096).astype(ml_dtypes.bfloat16)}, 2
    )
    keyring = tmp_path / "trusted.pem"
    keyring.write_bytes(old_public + new_public)
    with Subscriber(store, verifier=Verifier.from_file(keyring)) as sub:
        assert sub.fetch(1).version == 1 and sub.fetch(2).version == 2
    keyring.write_bytes(new_public)  # the old key is revoked
    with Subscriber(store, verifier=Verifier.from_file(keyring)) as sub:
        assert sub.fetch(2).version == 2
        with pytest.raises(SignatureError, match="unknown key"):
            sub.fetch(1)


def _plant(ours: ObjectStore, theirs: ObjectStore, version: int) -> bytes:
    """Copy their version ``version`` and their LATEST into our prefix; our LATEST before."""
    before = ours.get_bytes(layout.LATEST_KEY)
    for info in theirs.list(layout.version_dir(version) + "/"):
        ours.put_bytes(info.key, theirs.get_bytes(info.key))
    ours.put_bytes(layout.LATEST_KEY, theirs.get_bytes(layout.LATEST_KEY))
    return before


def _unplant(ours: ObjectStore, version: int, latest: bytes) -> None:
    ours.delete([info.key for info in ours.list(layout.version_dir(version) + "/")])
    ours.put_bytes(layout.LATEST_KEY, latest)


def _other_run(signer: Signer, versions: int) -> ObjectStore:
    """Another run signed with the same key: its newest version a keyframe."""
    theirs = _store()
    rng = np.random.default_rng(99)
    pub = Publisher(theirs, PublishConfig(delta="never"), signer=signer)
    for v in range(1, versions + 1):
        pub.publish({"w": rng.standard_normal(4096).astype(ml_dtypes.bfloat16)}, v)
    return theirs


def test_another_runs_signed_version_is_refused_and_the_worker_recovers_at_once(pair) -> None:  # type: ignore[no-untyped-def]
    """Runs that share a key: their genuine keyframe and LATEST, planted in our prefix, are
    not installed, set no floor, and our next version installs as soon as it is there."""
    from wanrl_s3 import Watcher

    signer, verifier = pair
    ours, theirs = _store(), _other_run(signer, 3)
    _publish(ours, signer, 2)
    with Subscriber(ours, verifier=verifier) as sub:
        w = Watcher(sub)
        assert w.poll_once().version == 2 and w.fetch_once()  # type: ignore[union-attr]
        assert w.install().version == 2  # type: ignore[union-attr]
        good = _plant(ours, theirs, 3)
        with pytest.raises(VerificationError, match=r"belongs to run .* this reader follows run"):
            w.poll_once()
        assert not w.fetch_once() and w.ready_version is None  # nothing of theirs fetched
        _unplant(ours, 3, good)
        state = {"w": np.random.default_rng(3).standard_normal(4096).astype(ml_dtypes.bfloat16)}
        Publisher(ours, PublishConfig(delta="never"), signer=signer).publish(state, 3)
        assert w.poll_once().version == 3 and w.fetch_once()  # type: ignore[union-attr]
        result = w.install()
        assert result is not None and result.version == 3
        assert w.sub.fetch(3).tensors["w"].tobytes() == state["w"].tobytes()


def test_a_reader_told_the_run_refuses_another_run_at_first_contact(pair) -> None:  # type: ignore[no-untyped-def]
    signer, verifier = pair
    ours, theirs = _store(), _other_run(signer, 3)
    _publish(ours, signer, 2)
    run = Latest.from_json(ours.get_bytes(layout.LATEST_KEY)).origin_run_id
    assert run is not None
    good = _plant(ours, theirs, 3)
    with Subscriber(ours, verifier=verifier, run=run) as sub:
        with pytest.raises(VerificationError, match="belongs to run"):
            sub.fetch("latest")
        with pytest.raises(VerificationError, match="belongs to run"):
            sub.fetch(3)  # by number too
    _unplant(ours, 3, good)
    with Subscriber(ours, verifier=verifier, run=run) as sub:
        assert sub.fetch("latest").version == 2


def test_every_publisher_of_a_run_keeps_its_first_run_id(pair) -> None:  # type: ignore[no-untyped-def]
    """A restarted publisher (another run id), adopting the newest or not, after LATEST was
    damaged or deleted, stays in the run that its readers follow."""
    signer, _ = pair
    store = _store()
    _publish(store, signer, 1)
    first = Latest.from_json(store.get_bytes(layout.LATEST_KEY))
    state = {"w": np.ones(8, np.float32)}
    for v, damage in ((2, None), (3, b"{not json"), (4, "delete")):
        if damage == "delete":
            store.delete([layout.LATEST_KEY])
        elif damage is not None:
            store.put_bytes(layout.LATEST_KEY, damage)
        Publisher(store, PublishConfig(delta="never"), signer=signer).publish(state, v)
        pointer = Latest.from_json(store.get_bytes(layout.LATEST_KEY))
        assert pointer.run_id != first.run_id  # a new process, a new run id
        assert pointer.origin_run_id == first.origin_run_id == first.run_id
        with Subscriber(store) as sub:
            assert sub.manifest(v).origin_run_id == first.run_id
