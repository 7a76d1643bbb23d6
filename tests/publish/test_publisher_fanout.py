"""Fanout: one publisher writes every region, from one pass over the tensors."""

from __future__ import annotations

import pytest

from tests.regions.support import SMALL, model, nudge, one_pass, same, three_regions
from wanrl_s3.errors import PreconditionFailedError, VersionConflictError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store


def _stores(s3_endpoint: str) -> list[ObjectStore]:
    regions = three_regions(s3_endpoint, "fanout")
    return [r.store() for r in regions.publish_regions]


def _version_keys(store: ObjectStore, version: int) -> dict[str, int]:
    return {o.key: o.size for o in store.list(layout.version_dir(version) + "/")}


def test_fanout_commits_every_region_from_one_pass(s3_endpoint: str) -> None:
    stores = _stores(s3_endpoint)
    pub = Publisher(stores, SMALL)
    state = model(1)
    for version in (1, 2):
        seen: list[str] = []
        result = pub.publish(one_pass(state, seen), version)  # a generator: read once
        assert seen == list(state) and result.latest_moved
        assert result.kind == ("full" if version == 1 else "delta")
        layouts = [_version_keys(s, version) for s in stores]
        assert len(layouts[0]) >= 2 and all(keys == layouts[0] for keys in layouts)
        manifests = {s.get_bytes(layout.manifest_key(version)) for s in stores}
        assert len(manifests) == 1  # one manifest, valid in every region
        for store in stores:
            with Subscriber(store) as sub:
                assert sub.latest().version == version  # type: ignore[union-attr]
                assert same(sub.fetch(version).tensors, state)
        state = nudge(state, version)


def test_a_version_claimed_in_any_region_is_a_conflict_that_writes_nothing(
    s3_endpoint: str,
) -> None:
    stores = _stores(s3_endpoint)
    Publisher(stores[2], PublishConfig(delta="never")).publish(model(9), 3)  # only in apne1
    pub = Publisher(stores, SMALL)
    with pytest.raises(
        VersionConflictError,
        match=rf"not newer than the newest version at {stores[2].url} \(LATEST names v3\)",
    ):
        pub.publish(model(1), 2)
    stores[2].delete([layout.LATEST_KEY])  # the manifest alone claims the version
    with pytest.raises(VersionConflictError, match=f"version 3 already exists at {stores[2].url}"):
        pub.publish(model(1), 3)
    assert all(not _version_keys(s, v) for s in stores for v in (2, 3) if s is not stores[2])
    assert not any(s.exists(layout.LATEST_KEY) for s in stores)


def test_losing_the_manifest_race_in_one_region_stops_before_any_latest_moves(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = _stores(s3_endpoint)
    rival = model(7)
    real_put = stores[1].put_bytes

    def raced(key: str, data: bytes, **kwargs: object) -> str:
        if key == layout.manifest_key(1):  # another publisher commits v1 in euw1 first
            other = open_store(stores[1].url, endpoint_url=s3_endpoint)
            Publisher(other, PublishConfig(delta="never")).publish(rival, 1)
        return real_put(key, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stores[1], "put_bytes", raced)
    with pytest.raises(
        VersionConflictError,
        match=rf"committed at {stores[0].url} only, and "
        "LATEST moved nowhere",
    ) as info:
        Publisher(stores, SMALL).publish(model(1), 1)
    assert isinstance(info.value.__cause__, PreconditionFailedError)
    assert stores[0].exists(layout.manifest_key(1)) and not stores[0].exists(layout.LATEST_KEY)
    assert not _version_keys(stores[2], 1)  # the uncommitted region's payload is removed
    with Subscriber(stores[1]) as sub:  # the rival's version is untouched
        assert same(sub.fetch(1).tensors, rival)
