"""Publishing one version from R ranks (ShardedPublisher), over real HTTP to SeaweedFS, in threads.

Each rank has its own store client, as separate processes would; the ranks meet
only through the bucket.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3 import (
    PublishResult,
    RetryPolicy,
    ShardedPublisher,
    ShareSelector,
    Subscriber,
    open_store,
    to_torch,
)
from wanrl_s3.errors import StoreError, UsageError, VersionConflictError
from wanrl_s3.fleet.retention import RetentionPolicy, collect
from wanrl_s3.format import latest, layout
from wanrl_s3.publish.publisher import PublishConfig
from wanrl_s3.store import FakeClock, ObjectStore
from wanrl_s3.testing import (
    Fault,
    FaultProxy,
    Rule,
    llama_like_layout,
    nudge_state,
    random_bf16_state,
)

CONFIG = PublishConfig(object_bytes=8192, keyframe_every=3)
State = dict[str, np.ndarray]


def model(seed: int = 0) -> State:
    state = random_bf16_state(llama_like_layout("tiny"), seed=seed)
    state["scale"] = np.full((), 0.5, ml_dtypes.bfloat16)  # a 0-d tensor among them
    return state


def run_ranks(calls: Sequence[Callable[..., Any]]) -> list[Any]:
    """Each call in its own thread, all at once; each one's result or exception."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.exception() or f.result() for f in futures]


def ranks_of(
    url: str, endpoint: str, ranks: int, retry: RetryPolicy | None = None, **kw: Any
) -> list[ShardedPublisher]:
    kw.setdefault("run_id", "job-a")
    kw.setdefault("poll_s", 0.05)
    kw.setdefault("timeout_s", 60.0)
    store_kw = (
        {"endpoint_url": endpoint} if retry is None else {"endpoint_url": endpoint, "retry": retry}
    )
    return [
        ShardedPublisher(open_store(url, **store_kw), CONFIG, rank=r, ranks=ranks, **kw)
        for r in range(ranks)
    ]


def publish_all(pubs: list[ShardedPublisher], states: Any, version: int) -> list[Any]:
    """Every rank publishes ``version``: the same state (balanced) or its own (a list)."""
    per_rank = states if isinstance(states, list) else [states] * len(pubs)
    pairs = zip(pubs, per_rank, strict=True)
    return run_ranks([lambda p=p, s=s: p.publish(s, version) for p, s in pairs])


def pulled(store: ObjectStore, version: int | str = "latest") -> State:
    with Subscriber(store) as sub:
        return dict(sub.fetch(version).tensors)


def assert_bit_exact(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, arr in want.items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape, name
        assert got[name].tobytes() == arr.tobytes(), name


def keys_under(store: ObjectStore, version: int) -> list[str]:
    return [o.key for o in store.list(layout.version_dir(version) + "/")]


@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_publish_shares_and_a_subscriber_pulls_the_whole_version(
    s3_url: str, s3_endpoint: str, ranks: int
) -> None:
    pubs = ranks_of(s3_url, s3_endpoint, ranks)
    assert [(p.rank, p.ranks) for p in pubs] == [(r, ranks) for r in range(ranks)]
    state = model()
    results = publish_all(pubs, state, 1)
    assert isinstance(results[0], PublishResult) and results[0].latest_moved
    assert results[1:] == [None] * (ranks - 1)
    store = pubs[0].store
    assert_bit_exact(pulled(store), state)
    manifest = Subscriber(store).manifest(1)
    # every rank uploaded a share of its own, balanced by bytes: the largest share is at
    # most the mean plus the largest tensor (greedy balancing's bound)
    shares: dict[str, int] = {}
    for t in manifest.tensors:
        pid = t.segments[0].key.split("/")[0] if t.segments else None
        if pid is not None:
            shares[pid] = shares.get(pid, 0) + t.nbytes
    assert len(shares) == ranks
    biggest = max(a.nbytes for a in state.values())
    assert max(shares.values()) <= manifest.raw_bytes / ranks + biggest
    # the share records are gone once the version is committed
    assert not [k for k in keys_under(store, 1) if "/shares/" in k]


def test_deltas_across_ranks_keyframe_cadence_and_the_too_big_rule(
    s3_url: str, s3_endpoint: str
) -> None:
    pubs = ranks_of(s3_url, s3_endpoint, 3)
    store = pubs[0].store
    states = [model()]
    for v in range(1, 7):
        if v > 1:  # v5: new random values everywhere, no delta pays
            states.append(model(seed=5) if v == 5 else nudge_state(states[-1], 0.01, seed=v))
        results = publish_all(pubs, states[-1], v)
        assert not any(isinstance(r, BaseException) for r in results), results
    with Subscriber(store) as sub:
        kinds = {v: sub.manifest(v).kind for v in range(1, 7)}
        # cadence 3: v1 keyframe, v2 v3 deltas, v4 keyframe; v5 a delta too big to pay,
        # so v6 is a keyframe on every rank (the committed v5 stays a valid delta)
        assert kinds == {1: "full", 2: "delta", 3: "delta", 4: "full", 5: "delta", 6: "full"}
        m3 = sub.manifest(3)
        assert m3.base_version == 2 and m3.keyframe_version == 1
        assert m3.stored_bytes < m3.raw_bytes / 4
        snap2 = sub.fetch(2)
        assert_bit_exact(sub.fetch(3, have=snap2).tensors, states[2])  # delta from v2
        for v in (3, 5):
            assert_bit_exact(sub.fetch(v).tensors, states[v - 1])  # the chain from a keyframe


def test_a_rank_without_a_base_sends_its_share_whole_and_the_cadence_holds(
    s3_url: str, s3_endpoint: str
) -> None:
    """A restarted rank (no base) beside ranks with bases: a delta version holding whole
    tensors; the restarted rank counts the chain from the store and agrees on the keyframe."""
    pubs = ranks_of(s3_url, s3_endpoint, 2)
    store = pubs[0].store
    states = [model(), nudge_state(model(), 0.01, seed=2)]
    for v, state in ((1, states[0]), (2, states[1])):
        publish_all(pubs, state, v)
    pubs[1] = ranks_of(s3_url, s3_endpoint, 2)[1]  # rank 1 restarts: it holds no base
    states.append(nudge_state(states[-1], 0.01, seed=3))
    assert publish_all(pubs, states[2], 3)[1] is None
    states.append(nudge_state(states[-1], 0.01, seed=4))
    assert isinstance(publish_all(pubs, states[3], 4)[0], PublishResult)
    with Subscriber(store) as sub:
        m3 = sub.manifest(3)
        encodings = {t.encoding for t in m3.tensors}
        assert m3.kind == "delta" and "xor-delta" in encodings and encodings - {"xor-delta"}
        assert sub.manifest(4).kind == "full"  # keyframe_every=3, on both ranks
        assert_bit_exact(sub.fetch(3).tensors, states[2])


def test_balanced_ranks_may_hold_placeholders_for_the_tensors_of_other_ranks(
    s3_url: str, s3_endpoint: str
) -> None:
    """Each rank holds only its share (as ShareSelector picks it); every other tensor is a
    torch ``meta`` tensor, which has no data to read: the version still commits whole."""
    torch = pytest.importorskip("torch")
    state = model()
    pubs = ranks_of(s3_url, s3_endpoint, 3)
    per_rank = []
    for pub in pubs:
        selector = ShareSelector(pub.rank, pub.ranks)
        held: dict[str, Any] = {}
        for name, arr in state.items():
            real = to_torch(arr)
            meta = torch.empty(real.shape, dtype=real.dtype, device="meta")
            held[name] = real if selector.owner(name, meta) == pub.rank else meta
        assert 0 < sum(not t.is_meta for t in held.values()) < len(state)
        per_rank.append(held)
    results = publish_all(pubs, per_rank, 1)
    assert isinstance(results[0], PublishResult) and results[1:] == [None, None], results
    assert_bit_exact(pulled(pubs[0].store), state)


def test_own_mode_each_rank_publishes_what_it_sees(s3_url: str, s3_endpoint: str) -> None:
    state = model()
    names = sorted(state)
    shards = [{n: state[n] for n in names[r::2]} for r in range(2)]
    pubs = ranks_of(s3_url, s3_endpoint, 2, assign="own")
    results = publish_all(pubs, shards, 1)
    assert isinstance(results[0], PublishResult)
    assert_bit_exact(pulled(pubs[0].store), state)


def test_duplicate_names_across_shares_are_refused_and_nothing_is_visible(
    s3_url: str, s3_endpoint: str
) -> None:
    state = model()
    pubs = ranks_of(s3_url, s3_endpoint, 2, assign="own")
    store = pubs[0].store
    publish_all(pubs, [{"a": state["scale"]}, {"b": state["scale"]}], 1)
    overlapping = [dict(list(state.items())[:3]), dict(list(state.items())[2:])]
    results = publish_all(pubs, overlapping, 2)
    assert isinstance(results[0], UsageError)
    assert "is in the shares of rank 0 and rank 1" in str(results[0])
    assert isinstance(results[1], StoreError) and "not committed" in str(results[1])
    assert latest.read(store).version == 1  # type: ignore[union-attr]
    assert not store.exists(layout.manifest_key(2))
    assert [k for k in keys_under(store, 2) if k.endswith(".bin")] == []  # both shares removed


def test_ranks_that_saw_different_streams_are_refused(s3_url: str, s3_endpoint: str) -> None:
    state = model()
    fewer = dict(list(state.items())[1:])
    pubs = ranks_of(s3_url, s3_endpoint, 2)
    results = publish_all(pubs, [state, fewer], 1)
    assert isinstance(results[0], UsageError) and "different tensor streams" in str(results[0])
    assert latest.read(pubs[0].store) is None


def test_ranks_arrive_in_any_order(s3_url: str, s3_endpoint: str) -> None:
    """The committer waits for late ranks; a rank that finishes first waits for the commit."""
    state = model()

    def late(pub: ShardedPublisher, delay_s: float, version: int) -> Any:
        time.sleep(delay_s)
        return pub.publish(state, version)

    for version, order in ((1, [0, 1, 2]), (2, [2, 1, 0]), (3, [1, 0, 2])):
        pubs = ranks_of(s3_url, s3_endpoint, 3, run_id=f"job-{version}")
        delays_s = [0.4 * order.index(r) for r in range(3)]  # ranks start 0.4 s apart
        results = run_ranks(
            [lambda p=p, d=d, v=version: late(p, d, v) for p, d in zip(pubs, delays_s, strict=True)]
        )
        assert isinstance(results[0], PublishResult), results
        assert results[1:] == [None, None]
    assert_bit_exact(pulled(pubs[0].store), state)


def test_two_jobs_racing_for_a_version_one_wins_the_other_leaves_nothing(
    s3_url: str, s3_endpoint: str
) -> None:
    a, b = model(seed=1), model(seed=2)
    jobs = {
        "job-a": ranks_of(s3_url, s3_endpoint, 2, run_id="job-a"),
        "job-b": ranks_of(s3_url, s3_endpoint, 2, run_id="job-b"),
    }
    start = threading.Barrier(4)

    def rank(pub: ShardedPublisher, state: State) -> Any:
        start.wait()
        return pub.publish(state, 1)

    calls = [lambda p=p: rank(p, a) for p in jobs["job-a"]]
    calls += [lambda p=p: rank(p, b) for p in jobs["job-b"]]
    results = run_ranks(calls)
    winners = [i for i in (0, 2) if isinstance(results[i], PublishResult)]
    assert len(winners) == 1, results
    won = winners[0]
    loser = 2 - won
    assert isinstance(results[loser], VersionConflictError)
    assert isinstance(results[loser + 1], VersionConflictError)
    assert results[won + 1] is None
    store = jobs["job-a"][0].store
    assert_bit_exact(pulled(store), a if won == 0 else b)
    with Subscriber(store) as sub:
        referenced = {o.key for o in sub.manifest(1).objects}
    payload = {k.split("/", 2)[2] for k in keys_under(store, 1) if k.endswith(".bin")}
    assert payload == referenced  # the loser's payload removed, the winner's intact


def test_a_rank_that_never_arrives_times_out_and_nothing_becomes_visible(
    s3_url: str, s3_endpoint: str
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    state = model()
    solo = ShardedPublisher(store, CONFIG, rank=0, ranks=1, run_id="warm-up")
    solo.publish(state, 1)
    clock = FakeClock()
    pubs = ranks_of(s3_url, s3_endpoint, 2, timeout_s=5.0, poll_s=0.5, clock=clock)
    with pytest.raises(StoreError, match=r"rank\(s\) 1 posted no share within 5 s"):
        pubs[0].publish(state, 2)
    assert sum(clock.sleeps) >= 5.0  # waited on fake time, not real time
    assert latest.read(store).version == 1  # type: ignore[union-attr]
    assert not store.exists(layout.manifest_key(2))
    assert [k for k in keys_under(store, 2) if k.endswith(".bin")] == []
    # the late rank arrives after the committer gave up: it learns so, and removes its share
    with pytest.raises(StoreError, match="the committing rank gave up"):
        pubs[1].publish(state, 2)
    leftovers = keys_under(store, 2)
    assert leftovers and all("/shares/job-a/" in k for k in leftovers)
    assert [k for k in leftovers if k.endswith(".bin")] == []
    # a version never committed leaves only share records and its abort marker: gc's orphans
    collect(store, RetentionPolicy(grace_s=0.0))
    assert keys_under(store, 2) == []
    assert_bit_exact(pulled(store), state)


def test_a_rank_that_fails_before_its_share_stops_the_others_at_once(
    s3_url: str, s3_endpoint: str
) -> None:
    """Rank 2 cannot read LATEST (its claimability check fails, on it alone): it posts the
    abort, so rank 1 (waiting for the commit) and rank 0 (waiting for the shares) stop at
    their first look instead of waiting out timeout_s, and remove their shares."""
    clock, timeout_s = FakeClock(), 600.0
    kw = {"timeout_s": timeout_s, "poll_s": 0.5, "clock": clock}
    pubs = ranks_of(s3_url, s3_endpoint, 3, **kw)
    state = model()
    unreadable = Rule(Fault.INTERNAL_ERROR, method="GET", key=r"/LATEST$")
    with FaultProxy(s3_endpoint, rules=[unreadable]) as proxy:
        pubs[2] = ranks_of(s3_url, proxy.url, 3, RetryPolicy(max_attempts=1), **kw)[2]
        with pytest.raises(StoreError, match="LATEST"):
            pubs[2].publish(state, 1)
    for rank in (1, 0):  # rank 0 last: it meets the abort while gathering
        with pytest.raises(StoreError, match=r"not committed: rank 2: it could not begin v1"):
            pubs[rank].publish(state, 1)
    assert sum(clock.sleeps) < 0.01 * timeout_s
    store = pubs[0].store
    assert latest.read(store) is None and not store.exists(layout.manifest_key(1))
    assert [k for k in keys_under(store, 1) if k.endswith(".bin")] == []


def test_a_lost_response_to_a_share_record_create_is_ours(s3_url: str, s3_endpoint: str) -> None:
    rule = Rule(Fault.RESET_AFTER, method="PUT", key=r"/shares/job-a/0{5}1\.json", count=1)
    with FaultProxy(s3_endpoint, rules=[rule]) as proxy:
        pubs = ranks_of(s3_url, proxy.url, 2)
        state = model()
        results = publish_all(pubs, state, 1)
        assert proxy.counts[Fault.RESET_AFTER] == 1
    assert isinstance(results[0], PublishResult) and results[1] is None, results
    assert_bit_exact(pulled(open_store(s3_url, endpoint_url=s3_endpoint)), state)


def test_a_record_from_another_launch_with_the_same_run_id_is_refused(
    s3_url: str, s3_endpoint: str
) -> None:
    state = model()
    first = ranks_of(s3_url, s3_endpoint, 2, timeout_s=1.0, clock=FakeClock())
    with pytest.raises(StoreError, match="not committed within 2 s"):
        first[1].publish(state, 1)  # rank 1 posts, its committer never comes
    second = ranks_of(s3_url, s3_endpoint, 2)  # a restart that reused the run id
    results = publish_all(second, state, 1)
    assert isinstance(results[1], VersionConflictError)
    assert "give every launch its own run id" in str(results[1])
    assert isinstance(results[0], StoreError) and "gave up waiting" in str(results[0])
    assert latest.read(second[0].store) is None


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"rank": 2, "ranks": 2}, "rank must be below ranks"),
        ({"rank": 0, "ranks": 0}, "ranks must be an integer >= 1"),
        ({"rank": 0, "ranks": 2, "commit_rank": 3}, "commit_rank must be below"),
        ({"rank": 0, "ranks": 2, "assign": "random"}, "assign must be one of"),
        ({"rank": 0, "ranks": 2, "run_id": ".."}, "run_id must be"),
        ({"rank": 0, "ranks": 2, "timeout_s": 0}, "timeout_s must be a positive"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(kw: dict[str, Any], message: str) -> None:
    kw.setdefault("run_id", "job")
    with pytest.raises(UsageError, match=message):
        ShardedPublisher(open_store("memory://shard-args"), **kw)
