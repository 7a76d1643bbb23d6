"""Copy mode: the relay commits each version in every replica, server-side where it can.

use1 (primary) and euw1 are buckets on one SeaweedFS server, so euw1's copies are
CopyObject requests inside it; apne1 is a bucket on a second SeaweedFS server in
its own process (another S3 service), so its copies are streamed through the
relay.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from tests.regions.support import SMALL, model, nudge, same, three_regions, wait_for
from wanrl_s3.errors import SignatureError, StoreError, VerificationError, VersionConflictError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.format.latest import Latest
from wanrl_s3.format.manifest import Manifest
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.regions.config import RegionsConfig
from wanrl_s3.regions.relay import Relay, RelayConfig
from wanrl_s3.store import ObjectStore, get_or_none, open_store
from wanrl_s3.testing import local_s3


@pytest.fixture(scope="module")
def other_service() -> Iterator[str]:
    """A second S3 endpoint: a SeaweedFS server of its own."""
    with local_s3() as endpoint:
        yield endpoint


@pytest.fixture
def regions(s3_endpoint: str, other_service: str) -> RegionsConfig:
    return three_regions(s3_endpoint, "copy", endpoints={"apne1": other_service})


def _latest(store: ObjectStore) -> int | None:
    blob = get_or_none(store, layout.LATEST_KEY)
    return None if blob is None else Latest.from_json(blob.data).version


def test_relay_copies_whole_chains_server_side_or_streamed(regions: RegionsConfig) -> None:
    primary = regions.store("use1")
    pub = Publisher(primary, SMALL)
    states = {1: model(1)}
    states[2] = nudge(states[1], 2)
    states[3] = nudge(states[2], 3)
    for v, state in states.items():
        pub.publish(state, v)
    with Relay.from_regions(regions, RelayConfig(poll_interval_s=0.05)) as relay:
        done = relay.sync_once()
        assert relay.sync_once() == []  # LATEST unchanged: nothing to do
        copied = {(d.region, d.version): d.server_side for d in done}
        assert copied == {
            ("euw1", 1): True,
            ("euw1", 2): True,
            ("euw1", 3): True,
            ("apne1", 1): False,
            ("apne1", 2): False,
            ("apne1", 3): False,
        }
        for name in ("euw1", "apne1"):
            replica = regions.store(name)
            for v in states:  # byte for byte the primary's manifest: signatures still verify
                key = layout.manifest_key(v)
                assert replica.get_bytes(key) == primary.get_bytes(key)
            with Subscriber(replica) as sub:
                assert sub.latest().version == 3  # type: ignore[union-attr]
                assert same(sub.fetch(3).tensors, states[3])  # the keyframe is there too
        full = Publisher(primary, PublishConfig(delta="never"))
        full.publish(model(4), 4)
        full.publish(model(5), 5)  # a keyframe: nothing before it is needed
        assert {(d.region, d.version) for d in relay.sync_once()} == {("euw1", 5), ("apne1", 5)}


def test_run_loop_follows_the_primary_until_stopped(regions: RegionsConfig) -> None:
    pub = Publisher(regions.store("use1"), SMALL)
    replicas = [regions.store("euw1"), regions.store("apne1")]

    def replicas_at(version: int) -> bool:
        return all(_latest(r) == version for r in replicas)

    state = model(1)
    pub.publish(state, 1)
    stop = threading.Event()
    with Relay.from_regions(regions, RelayConfig(poll_interval_s=0.05)) as relay:
        t = threading.Thread(target=relay.run, args=(stop,))
        t.start()
        try:
            wait_for(lambda: replicas_at(1))
            state = nudge(state, 2)
            pub.publish(state, 2)
            wait_for(lambda: replicas_at(2))
        finally:
            stop.set()
            t.join()
    for replica in replicas:
        with Subscriber(replica) as sub:
            assert same(sub.fetch(2).tensors, state)


def test_a_replica_holding_another_manifest_is_a_conflict_not_overwritten(
    regions: RegionsConfig,
) -> None:
    Publisher(regions.store("use1"), SMALL).publish(model(1), 1)
    squatter = Publisher(regions.store("euw1"), PublishConfig(delta="never"))
    squatter.publish(model(9), 1)
    regions.store("euw1").delete([layout.LATEST_KEY])
    with (
        Relay.from_regions(regions) as relay,
        pytest.raises(VersionConflictError, match="is not the primary's"),
    ):
        relay.sync_once()
    with Subscriber(regions.store("euw1")) as sub:
        assert same(sub.fetch(1).tensors, model(9))


def test_an_interrupted_pass_is_finished_by_the_next(
    regions: RegionsConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    Publisher(regions.store("use1"), SMALL).publish(model(1), 1)
    with Relay.from_regions(regions) as relay:
        real = Relay._commit_manifest
        calls = []

        def crash_after_manifest(self: Relay, replica: ObjectStore, version: int) -> None:
            real(self, replica, version)
            calls.append(version)
            if len(calls) == 1:
                raise StoreError("simulated crash after the manifest, before LATEST")

        monkeypatch.setattr(Relay, "_commit_manifest", crash_after_manifest)
        with pytest.raises(StoreError, match="simulated"):
            relay.sync_once()
        euw1 = regions.store("euw1")
        assert euw1.exists(layout.manifest_key(1)) and _latest(euw1) is None
        relay.sync_once()
    assert _latest(euw1) == _latest(regions.store("apne1")) == 1


def _payload_key(store: ObjectStore, version: int) -> str:
    """The key of the first payload object of ``version``."""
    (info, *_) = [
        i for i in store.list(layout.version_dir(version) + "/") if i.key.endswith(".bin")
    ]
    return info.key


def _flip(data: bytes) -> bytes:
    return data[:100] + bytes([data[100] ^ 1]) + data[101:]


DAMAGE = {
    "flipped": _flip,
    "replaced": lambda data: np.random.default_rng(5).bytes(len(data)),
    "truncated": lambda data: data[: len(data) // 2],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_primary_version_is_refused_and_relayed_once_repaired(
    regions: RegionsConfig, damage: str
) -> None:
    """Flipped, replaced or truncated in the primary: copied server-side (euw1) or streamed
    (apne1), the copy does not verify, so nothing of it is committed; the replicas keep
    serving v1 and take v2 on the first pass after the primary is repaired."""
    primary = regions.store("use1")
    pub = Publisher(primary, SMALL)
    state = model(1)
    pub.publish(state, 1)
    with Relay.from_regions(regions) as relay:
        relay.sync_once()
        state2 = nudge(state, 2)
        pub.publish(state2, 2)
        key = _payload_key(primary, 2)
        good = primary.get_bytes(key)
        primary.put_bytes(key, DAMAGE[damage](good))
        with pytest.raises(VerificationError):
            relay.sync_once()
        assert set(relay.refused) == {"euw1", "apne1"} and "v2" in relay.refused["euw1"]
        for name in ("euw1", "apne1"):
            replica = regions.store(name)
            assert _latest(replica) == 1 and not replica.exists(layout.manifest_key(2))
        primary.put_bytes(key, good)  # repaired
        assert {(d.region, d.version) for d in relay.sync_once()} == {("euw1", 2), ("apne1", 2)}
        assert relay.refused == {}
    for name in ("euw1", "apne1"):
        with Subscriber(regions.store(name)) as sub:
            assert sub.latest().version == 2  # type: ignore[union-attr]
            assert same(sub.fetch(2).tensors, state2)


def test_a_primary_left_damaged_is_not_copied_again_every_pass(
    regions: RegionsConfig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unrepaired primary: the refused copy is tried again after 1, 2, 4 ... passes (a
    copy damaged in transit still heals), not every pass; a repair is taken at once. Each
    refusal and the first pass of each wait are logged, not every pass of the wait."""
    primary = regions.store("use1")
    pub = Publisher(primary, SMALL)
    pub.publish(model(1), 1)
    with Relay.from_regions(regions) as relay:
        relay.sync_once()
        pub.publish(nudge(model(1), 2), 2)
        key = _payload_key(primary, 2)
        good = primary.get_bytes(key)
        primary.put_bytes(key, _flip(good))
        copied: list[int] = []
        euw1 = relay.replicas["euw1"]
        real = euw1.copy_from

        def counting(*args: object, **kwargs: object) -> bool:
            copied.append(1)
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(euw1, "copy_from", counting)
        tried, logged = [], []
        for _ in range(7):
            before = len(copied)
            caplog.clear()
            with (
                caplog.at_level(logging.DEBUG, logger="wanrl_s3.regions.relay"),
                pytest.raises(VerificationError),
            ):
                relay.sync_once()
            tried.append(len(copied) > before)
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            logged.append(sum(r.getMessage().startswith("euw1:") for r in errors))
        assert tried == [True, False, True, False, False, True, False]  # waits 1, 2, 4 passes
        assert logged == [1, 1, 1, 1, 0, 1, 1]  # the second pass of the two-pass wait: quiet
        assert "not copied again" in relay.refused["euw1"]
        primary.put_bytes(key, good)  # repaired: a new ETag, tried at once
        assert ("euw1", 2) in {(d.region, d.version) for d in relay.sync_once()}
        assert relay.refused == {}


def test_a_replica_copied_from_an_edited_primary_is_repaired_with_it(
    regions: RegionsConfig,
) -> None:
    """Unsigned, an edit with a matching LATEST cannot be told from a publication: it is
    relayed. Once the primary is repaired the replica follows it: manifest and LATEST."""
    primary = regions.store("use1")
    Publisher(primary, SMALL).publish(model(1), 1)
    original = primary.get_bytes(layout.manifest_key(1))
    pointer = primary.get_bytes(layout.LATEST_KEY)
    edited = Manifest.from_json(original)
    edited = replace(edited, metadata={"step": "999"}, read_bytes=None)
    primary.put_bytes(layout.manifest_key(1), edited.to_json())
    primary.put_bytes(layout.LATEST_KEY, Latest.of(edited).to_json())
    with Relay.from_regions(regions) as relay:
        relay.sync_once()
        assert regions.store("euw1").get_bytes(layout.manifest_key(1)) == edited.to_json()
        primary.put_bytes(layout.manifest_key(1), original)  # repaired
        primary.put_bytes(layout.LATEST_KEY, pointer)
        relay.sync_once()
        relay.sync_once()  # and nothing left to do: no conflict on a later pass
    for name in ("euw1", "apne1"):
        replica = regions.store(name)
        assert replica.get_bytes(layout.manifest_key(1)) == original
        with Subscriber(replica) as sub:
            assert sub.manifest(1).metadata == {} and same(sub.fetch(1).tensors, model(1))
            assert sub.latest().manifest_hash == Manifest.from_json(original).digest  # type: ignore[union-attr]


def test_a_relay_that_starts_repairs_a_damaged_replica(regions: RegionsConfig) -> None:
    """A replica whose copy lost an object or had it cut short is copied again."""
    Publisher(regions.store("use1"), SMALL).publish(model(1), 1)
    with Relay.from_regions(regions) as relay:
        relay.sync_once()
    euw1, apne1 = regions.store("euw1"), regions.store("apne1")
    euw1.delete([_payload_key(euw1, 1)])
    key = _payload_key(apne1, 1)
    apne1.put_bytes(key, apne1.get_bytes(key)[:-10])
    with Relay.from_regions(regions) as relay:
        assert {(d.region, d.version) for d in relay.sync_once()} == {("euw1", 1), ("apne1", 1)}
    for replica in (euw1, apne1):
        with Subscriber(replica) as sub:
            assert same(sub.fetch(1).tensors, model(1))


def test_with_a_key_the_relay_relays_only_signed_versions_of_one_run(
    regions: RegionsConfig,
) -> None:
    """A forged manifest (re-pinned in an unsigned LATEST), or another run's genuine one
    under the same key, is not relayed; the genuine next version is."""
    from wanrl_s3.format.signing import Signer, Verifier, generate_keypair

    private, public = generate_keypair()
    signer, verifier = Signer(private), Verifier([public])
    primary = regions.store("use1")
    pub = Publisher(primary, SMALL, signer=signer)
    state = model(1)
    pub.publish(state, 1)
    with Relay.from_regions(regions, verifier=verifier) as relay:
        relay.sync_once()
        pointer = primary.get_bytes(layout.LATEST_KEY)
        m = Manifest.from_json(primary.get_bytes(layout.manifest_key(1)))
        forged = replace(m, metadata={"step": "999"}, read_bytes=None)
        primary.put_bytes(layout.manifest_key(1), forged.to_json())
        primary.put_bytes(layout.LATEST_KEY, Latest.of(forged).to_json())
        with pytest.raises(SignatureError, match="not signed"):
            relay.sync_once()
        primary.put_bytes(layout.manifest_key(1), m.to_json())
        theirs = open_store(f"memory://{uuid.uuid4().hex}")  # another run, the same key
        Publisher(theirs, SMALL, signer=signer).publish(model(9), 2)
        planted = [i.key for i in theirs.list(layout.version_dir(2) + "/")]
        for key in [*planted, layout.LATEST_KEY]:
            primary.put_bytes(key, theirs.get_bytes(key))
        with pytest.raises(VerificationError, match="belongs to run"):
            relay.sync_once()
        with (  # a relay started for one pass follows the run the replicas hold
            Relay.from_regions(regions, verifier=verifier) as once,
            pytest.raises(VerificationError, match="belongs to run"),
        ):
            once.sync_once()
        primary.delete(planted)
        primary.put_bytes(layout.LATEST_KEY, pointer)
        state = nudge(state, 2)
        pub.publish(state, 2)
        assert {(d.region, d.version) for d in relay.sync_once()} == {("euw1", 2), ("apne1", 2)}
    for name in ("euw1", "apne1"):
        with Subscriber(regions.store(name), verifier=verifier) as sub:
            assert same(sub.fetch("latest").tensors, state)
            assert sub.manifest(1).metadata == {}
