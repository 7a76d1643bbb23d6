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
    signer, verifier = pair
    ours, theirs = _store(), _store()
    _publish(ours, signer, 1)
    rng = np.random.default_rng(7)
    other = {"w": rng.standard_normal(4096).astype(ml_dtypes.bfloat16)}
    pub = Publisher(theirs, PublishConfig(delta="always"), signer=signer)
    pub.publish(other, 1)
    pub.publish(nudge_state(other, 0.02, seed=1), 2)
    for info in theirs.list(layout.version_dir(2)):
        ours.put_bytes(info.key, theirs.get_bytes(info.key))
    with (
        Subscriber(ours, verifier=verifier) as sub,
        pytest.raises(ManifestError, match="is not the one"),
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
