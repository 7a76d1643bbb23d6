"""Copy mode: the relay commits each version in every replica, server-side where it can.

use1 (primary) and euw1 are buckets on one SeaweedFS server, so euw1's copies are
CopyObject requests inside it; apne1 is a bucket on a second SeaweedFS server in
its own process (another S3 service), so its copies are streamed through the
relay.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.regions.support import SMALL, model, nudge, same, three_regions, wait_for
from wanrl_s3.errors import StoreError, VersionConflictError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.format.latest import Latest
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.regions.config import RegionsConfig
from wanrl_s3.regions.relay import Relay, RelayConfig
from wanrl_s3.store import ObjectStore, get_or_none
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
