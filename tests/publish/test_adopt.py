"""Adopting: a restarted publisher continues with deltas from the store's newest version."""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import UsageError, VerificationError, VersionConflictError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.publish.adopt import adopt_newest, adoption_point
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing.synthetic import nudge_state

CONFIG = PublishConfig(delta="auto", keyframe_every=10)


def _policy(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"layer{i}.w": rng.standard_normal(8192).astype(ml_dtypes.bfloat16) for i in range(3)}


def _two_versions(store: ObjectStore) -> dict[str, np.ndarray]:
    first = Publisher(store, CONFIG, run_id="run-a")
    v1 = _policy()
    first.publish(v1, 1)
    v2 = nudge_state(v1, 0.01, seed=2)
    assert first.publish(v2, 2).kind == "delta"
    return v2


def test_a_restarted_publisher_sends_a_delta(store: ObjectStore) -> None:
    v2 = _two_versions(store)
    restarted = Publisher(store, CONFIG, run_id="run-a")  # a new process: holds nothing
    point = adopt_newest(restarted)
    assert point is not None
    assert (point.version, point.keyframe_version, point.since_keyframe) == (2, 1, 1)
    assert point.next_version == 3
    v3 = nudge_state(v2, 0.01, seed=3)
    result = restarted.publish(v3, point.next_version)
    assert (result.kind, result.base_version) == ("delta", 2)
    with Subscriber(store) as sub:
        got = sub.fetch(3).tensors
    assert all(got[k].tobytes() == v3[k].tobytes() for k in v3)


def test_without_adopting_the_restart_would_send_a_keyframe(store: ObjectStore) -> None:
    v2 = _two_versions(store)
    result = Publisher(store, CONFIG).publish(nudge_state(v2, 0.01, seed=3), 3)
    assert result.kind == "full"  # what adopting exists to avoid


def test_adopting_a_local_copy_checks_it(store: ObjectStore) -> None:
    _two_versions(store)
    with Subscriber(store) as sub:
        snapshot = sub.fetch(2)
        older = sub.fetch(1)
    assert adopt_newest(Publisher(store, CONFIG), base=snapshot) is not None
    with pytest.raises(UsageError, match="holds v1 but the newest version is v2"):
        adopt_newest(Publisher(store, CONFIG), base=older)
    snapshot.tensors["layer0.w"][0] += 1  # a local copy that is not what was published
    with pytest.raises(VerificationError):
        adopt_newest(Publisher(store, CONFIG), base=snapshot)


def test_a_publisher_that_lost_the_race_since_it_looked_is_a_conflict(store: ObjectStore) -> None:
    """It read v1 as the newest and took it as its base; v2 landed before it adopted it."""
    _two_versions(store)
    with Subscriber(store) as sub:
        older = sub.fetch(1)
    with pytest.raises(VersionConflictError, match="version 2 is not newer than the newest"):
        adopt_newest(Publisher(store, CONFIG), base=older, publishing=2)
    assert adopt_newest(Publisher(store, CONFIG), publishing=3) is not None


def test_an_empty_store_has_nothing_to_adopt() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}")
    assert adopt_newest(Publisher(store, CONFIG)) is None
    with Subscriber(store) as sub:
        assert adoption_point(sub) is None


def test_the_first_signed_publication_is_a_keyframe(store: ObjectStore) -> None:
    """Turning signing on in a running store must not trap readers that require it."""
    from wanrl_s3.format.signing import Signer, Verifier, generate_keypair

    v2 = _two_versions(store)  # unsigned
    private, public = generate_keypair()
    signed = Publisher(store, CONFIG, signer=Signer(private))
    assert adopt_newest(signed) is not None
    result = signed.publish(nudge_state(v2, 0.01, seed=3), 3)
    assert result.kind == "full"
    with Subscriber(store, verifier=Verifier([public])) as sub:
        assert sub.fetch("latest").version == 3  # no unsigned version on the way


def test_a_damaged_newest_version_makes_the_next_publication_a_keyframe(
    store: ObjectStore,
) -> None:
    """Not a publisher stuck on exit 3 until someone passes --delta never."""
    from wanrl_s3.format import layout
    from wanrl_s3.format.manifest import Manifest

    v2 = _two_versions(store)
    m = Manifest.from_json(store.get_bytes(layout.manifest_key(2)))
    key = m.payload_key(m.objects[0].key)
    data = bytearray(store.get_bytes(key))
    data[len(data) // 2] ^= 0xFF
    store.put_bytes(key, bytes(data))
    restarted = Publisher(store, CONFIG)
    point = adopt_newest(restarted)
    assert point is not None and point.version == 2
    assert restarted.publish(nudge_state(v2, 0.01, seed=3), 3).kind == "full"
    with Subscriber(store) as sub:
        assert sub.fetch("latest").version == 3


def test_a_signing_publisher_adopts_only_a_base_its_readers_trust() -> None:
    """The newest version signed by a key the readers do not trust (some bucket writer's, or
    a revoked one) is no delta base: the next publication is a keyframe, and the readers
    take it. A base signed by a key still in the keyring (rotation) stays a delta base."""
    from wanrl_s3.format.signing import Signer, Verifier, generate_keypair

    old_private, old_public = generate_keypair()
    new_private, new_public = generate_keypair()
    writer = Signer(generate_keypair()[0])  # a key some bucket writer holds
    v1 = _policy()
    v2, v3 = nudge_state(v1, 0.01, seed=2), nudge_state(v1, 0.01, seed=3)
    # no keyring: the publisher trusts its own key; a keyring: its keys (old one revoked)
    for keyring in (None, Verifier([new_public]), Verifier([old_public, new_public])):
        store = open_store(f"memory://{uuid.uuid4().hex}")
        Publisher(store, CONFIG, signer=Signer(old_private)).publish(v1, 1)
        Publisher(store, CONFIG, signer=writer).publish(v2, 2)
        restarted = Publisher(store, CONFIG, signer=Signer(new_private))
        point = adopt_newest(restarted, verifier=keyring)
        assert restarted.publish(v3, 3).kind == "full"
        assert point is not None and not point.adopted
        with Subscriber(store, verifier=keyring or Verifier([new_public])) as sub:
            assert sub.fetch("latest").version == 3
    store = open_store(f"memory://{uuid.uuid4().hex}")  # a rotation: the old key still trusted
    Publisher(store, CONFIG, signer=Signer(old_private)).publish(v1, 1)
    restarted = Publisher(store, CONFIG, signer=Signer(new_private))
    point = adopt_newest(restarted, verifier=Verifier([old_public, new_public]))
    assert point is not None and point.adopted
    assert restarted.publish(v3, 2).base_version == 1
    with Subscriber(store, verifier=Verifier([old_public, new_public])) as sub:
        assert sub.fetch("latest").version == 2


def test_cli_publish_takes_the_readers_keyring_for_its_base(tmp_path: Path) -> None:
    """`publish --verify-key`: a base signed by a key the keyring lacks (revoked) makes a
    keyframe; one signed by a key it holds (a rotation) a delta."""
    from wanrl_s3.cli import main
    from wanrl_s3.format.signing import Signer
    from wanrl_s3.io.safetensors_file import write_file

    for name in ("trainer", "old"):
        assert main(["keygen", "--out", str(tmp_path / name)]) == 0
    both = tmp_path / "both.pem"
    both.write_bytes(b"".join((tmp_path / f"{n}.pub.pem").read_bytes() for n in ("old", "trainer")))
    v1 = _policy()
    v2 = write_file(tmp_path / "v2.safetensors", nudge_state(v1, 0.01, seed=2))
    for keyring, kind in ((tmp_path / "trainer.pub.pem", "full"), (both, "delta")):
        url = f"file://{tmp_path}/{kind}"
        store = open_store(url)
        Publisher(store, CONFIG, signer=Signer.from_file(tmp_path / "old.pem")).publish(v1, 1)
        sign = ["--signing-key", str(tmp_path / "trainer.pem"), "--verify-key", str(keyring)]
        argv = ["publish", str(v2), "--store", url, "--version", "2", *sign]
        assert main(argv) == 0
        with Subscriber(store) as sub:
            assert sub.manifest(2).kind == kind


def _peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_adopting_holds_one_copy_of_the_base(tmp_path: Path) -> None:
    """The fetched version is the publisher's base itself, not copied into a second one:
    a restarted trainer of a model that fills half its host memory can still adopt."""
    store = open_store(f"file://{tmp_path}/store")
    rng = np.random.default_rng(1)
    big = {f"w{i}": rng.integers(0, 2**15, 2**21, np.int16) for i in range(32)}  # 128 MiB
    Publisher(store, PublishConfig(delta="never", full_coding="raw")).publish(big, 1)
    model_bytes = sum(a.nbytes for a in big.values())

    def fetch() -> None:
        with Subscriber(store) as sub:
            sub.fetch(1)

    fetching = _peak_bytes(fetch)  # the version, and the reads' buffers
    restarted = Publisher(store, CONFIG)
    adopting = _peak_bytes(lambda: adopt_newest(restarted))
    # a fetch's peak (1.5x here: the reads' buffers) and no more; copied, 2x
    assert adopting < fetching + model_bytes / 4, (adopting, fetching)
    result = restarted.publish({k: v.copy() for k, v in big.items()}, 2)
    assert result.kind == "delta" and result.stored_bytes < model_bytes / 100
