"""A restarted launch of R ranks continues from the store's newest version: its first
version is a delta on every rank, or on none (SeaweedFS)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from wanrl_s3 import ShardedPublisher, ShareSelector, Subscriber
from wanrl_s3.errors import ManifestError, StoreError
from wanrl_s3.format import layout
from wanrl_s3.format.signing import Signer, generate_keypair
from wanrl_s3.publish.share_record import base_json, parse_base
from wanrl_s3.testing import nudge_state

from .test_shard import State, assert_bit_exact, keys_under, model, publish_all, ranks_of, run_ranks


def share_names(pub: ShardedPublisher, state: State) -> list[str]:
    """The tensors ``pub`` publishes of ``state`` (what its host copy would hold)."""
    return [name for name, _ in ShareSelector(pub.rank, pub.ranks).select(state.items())]


def adopt_all(pubs: list[ShardedPublisher], state: State, version: int) -> list[Any]:
    calls = [lambda p=p: p.adopt_newest(version, share_names(p, state)) for p in pubs]
    return run_ranks(calls)


def test_a_restarted_launch_sends_a_delta_from_every_rank(s3_url: str, s3_endpoint: str) -> None:
    states = [model()]
    states.append(nudge_state(states[0], 0.01, seed=2))
    first = ranks_of(s3_url, s3_endpoint, 3)
    for v, state in enumerate(states, 1):
        publish_all(first, state, v)
    states.append(nudge_state(states[-1], 0.01, seed=3))
    again = ranks_of(s3_url, s3_endpoint, 3, run_id="job-b")  # the restarted launch
    points = adopt_all(again, states[2], 3)
    assert [(p.version, p.adopted) for p in points] == [(2, True)] * 3, points
    publish_all(again, states[2], 3)
    store = again[0].store
    with Subscriber(store) as sub:
        m3 = sub.manifest(3)
        assert m3.kind == "delta" and m3.base_version == 2 and m3.keyframe_version == 1
        deltas = {t.name for t in m3.tensors if t.encoding == "xor-delta"}
        assert all(set(share_names(p, states[2])) & deltas for p in again)  # every rank's
        assert all(t.name in deltas for t in m3.tensors if t.nbytes >= 1024)  # tiny: whole
        assert_bit_exact(sub.fetch(3).tensors, states[2])
    assert not [k for k in keys_under(store, 3) if "/shares/" in k]  # base.json went too


def test_the_ranks_follow_the_committer_when_the_readers_would_refuse_the_base(
    s3_url: str, s3_endpoint: str
) -> None:
    """The run was signed by a key the committing rank no longer trusts (rotated without a
    keyring): it publishes a keyframe, and so does every other rank, which holds no key
    to judge by: had it adopted on its own, the version would be a delta on a base its
    readers refuse."""
    (old, _), (new, _) = generate_keypair(), generate_keypair()
    state = model()
    signed = ranks_of(s3_url, s3_endpoint, 2, signer=Signer(old))
    publish_all(signed, state, 1)
    nudged = nudge_state(state, 0.01, seed=2)
    again = [
        ShardedPublisher(p.store, p.config, rank=p.rank, ranks=2, run_id="job-b", poll_s=0.05,
                         signer=Signer(new) if p.rank == 0 else None)
        for p in signed
    ]  # fmt: skip
    points = adopt_all(again, nudged, 2)
    assert [(p.version, p.adopted) for p in points] == [(1, False)] * 2, points
    publish_all(again, nudged, 2)
    with Subscriber(again[0].store) as sub:
        assert sub.manifest(2).kind == "full"
        assert_bit_exact(sub.fetch(2).tensors, nudged)


def test_a_rank_whose_committer_chose_another_version_sends_its_share_whole(
    s3_url: str, s3_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A base record that does not name the newest version this rank sees (a bucket writer's,
    or a store that moved on) is not followed."""
    state = model()
    pubs = ranks_of(s3_url, s3_endpoint, 2)
    publish_all(pubs, state, 1)
    publish_all(pubs, nudge_state(state, 0.01, seed=2), 2)
    store = pubs[0].store
    planted = layout.shares_dir(3, "job-b") + "/base.json"
    manifest_hash = Subscriber(store).manifest(1).digest
    store.put_bytes(planted, base_json(1, manifest_hash))
    follower = ranks_of(s3_url, s3_endpoint, 2, run_id="job-b")[1]
    with caplog.at_level(logging.WARNING, logger="wanrl_s3"):
        point = follower.adopt_newest(3, share_names(follower, state))
    assert point is not None and point.version == 2 and not point.adopted
    assert "chose v1 as the delta base but this rank sees v2" in caplog.text


def test_a_rank_waits_for_the_committers_choice_at_most_its_timeout(
    s3_url: str, s3_endpoint: str
) -> None:
    state = model()
    publish_all(ranks_of(s3_url, s3_endpoint, 2), state, 1)
    follower = ranks_of(s3_url, s3_endpoint, 2, run_id="job-b", timeout_s=0.3)[1]
    start = time.monotonic()
    with pytest.raises(StoreError, match=r"chose no delta base for v2 within 0\.3 s"):
        follower.adopt_newest(2, share_names(follower, state))
    assert time.monotonic() - start < 30


def test_an_empty_store_needs_no_choice(s3_url: str, s3_endpoint: str) -> None:
    follower = ranks_of(s3_url, s3_endpoint, 2, timeout_s=600.0)[1]
    assert follower.adopt_newest(1, ["w"]) is None  # returns at once: nothing to wait for


@pytest.mark.parametrize(
    "data",
    [
        b'{"format": "wanrl-s3/share-base", "base_version": 3}',
        b'{"format": "wanrl-s3/share-base", "base_version": -1, "manifest_hash": null}',
        b'{"format": "other", "base_version": null, "manifest_hash": null}',
        b"[]",
    ],
)
def test_a_malformed_base_record_is_refused(data: bytes) -> None:
    with pytest.raises(ManifestError, match="base record"):
        parse_base(data)


def test_a_base_record_round_trips() -> None:
    digest = "ab" * 32
    assert parse_base(base_json(7, digest)) == (7, digest)
    assert parse_base(base_json(None, None)) is None
