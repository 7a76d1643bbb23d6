"""StalenessFilter: the admission rule v >= v_t - S, its counters, and the S >= 3 config rule."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanrl_s3.errors import UsageError, WanrlError
from wanrl_s3.staleness import (
    MAX_STABLE_STALENESS,
    StalenessConfig,
    StalenessEnvelopeWarning,
    StalenessFilter,
    Tagged,
    default_version_of,
    is_admissible,
    kappa_for_staleness,
    oldest_version,
    stability_warning,
    staleness_for_kappa,
)


def make(staleness: int = 3, sink: object = None, learner_version: int = 0) -> StalenessFilter:
    return StalenessFilter(StalenessConfig(staleness), sink, learner_version=learner_version)  # type: ignore[arg-type]


# --- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "admitted"), [(7, True), (6, True), (10, True), (5, False), (0, False)]
)
def test_boundary_is_inclusive(version: int, admitted: bool) -> None:
    f = make(staleness=4, learner_version=10)  # admits v >= 6
    assert f.offer(Tagged("x", version)) is admitted
    assert is_admissible(version, 10, 4) is admitted


def test_trajectory_spanning_a_switch_counts_by_its_oldest_version() -> None:
    f = make(staleness=3, learner_version=10)
    assert not f.offer(Tagged("spans", (6, 9, 10)))  # oldest 6 < 10 - 3
    assert f.offer(Tagged("spans", (10, 7, 8)))  # oldest 7: on the boundary
    assert f.offer({"min_version": 7, "version": 1})  # min_version wins over version
    assert not f.offer({"versions": [11, 5]})
    assert oldest_version((9, 4, 12)) == 4


def test_custom_version_of_reads_verl_style_tags() -> None:
    f = StalenessFilter(
        StalenessConfig(3),
        learner_version=8,
        version_of=lambda tag: (tag["min_global_steps"], tag["max_global_steps"]),
    )
    assert f.select([{"min_global_steps": 4, "max_global_steps": 8}]) == []
    assert len(f.select([{"min_global_steps": 5, "max_global_steps": 6}])) == 1


@pytest.mark.parametrize("tag", [None, "3", 2.0, True, -1, (), (3, None), b"\x01"])
def test_bad_version_tags_are_usage_errors(tag: object) -> None:
    with pytest.raises(UsageError):
        oldest_version(tag)  # type: ignore[arg-type]


def test_item_without_a_version_names_the_fix() -> None:
    with pytest.raises(UsageError, match="version_of="):
        default_version_of(object())


# --- counters and histogram ------------------------------------------------------------------


def test_counters_and_histogram() -> None:
    f = make(staleness=3, learner_version=10)
    for version in (10, 10, 9, 7, 6, 2, 11):
        f.offer(Tagged(None, version))
    snap = f.snapshot()
    assert snap["staleness/generated"] == 7
    assert snap["staleness/admitted"] == 5  # 10, 10, 9, 7 and 11 (ahead of the learner)
    assert snap["staleness/dropped"] == 2
    assert snap["staleness/ahead"] == 1
    hist = [snap[f"staleness/age_hist/{k}"] for k in range(4)]
    assert hist == [3, 1, 0, 1]  # the ahead item is counted at age 0
    assert snap["staleness/age_hist/over"] == 2
    assert snap["staleness/admit_ratio"] == pytest.approx(5 / 7)
    assert snap["staleness/age_mean"] == pytest.approx((0 + 0 + 1 + 3 + 0) / 5)
    assert (snap["staleness/budget"], snap["staleness/kappa"]) == (3, 2)
    assert all(key.startswith("staleness/") for key in snap)


def test_snapshot_names_are_stable_before_any_item() -> None:
    snap = make(staleness=5).snapshot()
    assert snap["staleness/admit_ratio"] == 1.0
    assert {f"staleness/age_hist/{k}" for k in range(6)} <= snap.keys()
    assert snap.keys() == make(staleness=5).snapshot(reset=True).keys()


def test_reset_gives_per_window_counts_but_keeps_pending() -> None:
    q: queue.Queue[object] = queue.Queue()
    f = make(staleness=3, sink=q)
    f.put(Tagged("a", 0))
    f.put(Tagged("b", 0))
    f.get()
    first = f.snapshot(reset=True)
    assert (first["staleness/generated"], first["staleness/admitted"]) == (2, 1)
    second = f.snapshot()
    assert second["staleness/generated"] == 0
    assert second["staleness/pending"] == 1


# --- the wrapped queue ---------------------------------------------------------------------


def test_items_that_age_out_while_queued_are_dropped_at_get() -> None:
    q: queue.Queue[object] = queue.Queue()
    f = make(staleness=3, sink=q, learner_version=5)
    assert f.put(Tagged("old", 2))  # age 3: fresh enough when queued
    assert f.put(Tagged("new", 5))
    assert not f.put(Tagged("too-old", 1))  # never takes a slot
    assert q.qsize() == 2
    f.advance(6)  # "old" is now age 4 > S
    assert f.get(timeout=1).payload == "new"
    snap = f.snapshot()
    assert snap["staleness/dropped_at_put"] == 1
    assert snap["staleness/dropped_at_get"] == 1
    assert snap["staleness/admitted"] == 1
    assert snap["staleness/pending"] == 0
    # the filter called task_done for the dropped one, so only "new" keeps join() waiting
    assert q.unfinished_tasks == 1


def test_get_propagates_empty_after_draining_stale_items() -> None:
    q: queue.Queue[object] = queue.Queue()
    f = make(staleness=3, sink=q)
    f.put(Tagged("old", 0))
    f.advance(4)
    with pytest.raises(queue.Empty):
        f.get(block=False)
    assert f.snapshot()["staleness/dropped_at_get"] == 1


def test_sink_refusal_is_not_counted() -> None:
    q: queue.Queue[object] = queue.Queue(maxsize=1)
    f = make(sink=q)
    f.put(Tagged("a", 0))
    with pytest.raises(queue.Full):
        f.put(Tagged("b", 0), block=False)
    snap = f.snapshot()
    assert (snap["staleness/generated"], snap["staleness/pending"]) == (1, 1)


def test_callable_sink_gets_only_admitted_items() -> None:
    seen: list[object] = []
    f = make(staleness=3, sink=seen.append, learner_version=4)
    assert f.put(Tagged("a", 4))
    assert not f.put(Tagged("b", 0))
    assert [t.payload for t in seen] == ["a"]  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="queue sink"):
        f.get()


def test_sentinel_passes_through_uncounted() -> None:
    q: queue.Queue[object] = queue.Queue()
    f = make(sink=q)
    assert f.put(None)
    assert f.get() is None
    assert f.snapshot()["staleness/generated"] == 0


def test_without_sink_put_and_get_say_what_to_use() -> None:
    f = make()
    with pytest.raises(UsageError, match="offer"):
        f.put(Tagged("a", 0))
    with pytest.raises(UsageError, match="queue sink"):
        f.get()


def test_learner_version_only_grows() -> None:
    f = make(learner_version=5)
    f.advance(5)
    f.advance(9)
    with pytest.raises(UsageError, match="backwards"):
        f.advance(8)
    assert f.learner_version == 9


def test_bad_sink_and_config_types_are_refused() -> None:
    with pytest.raises(UsageError, match="sink"):
        StalenessFilter(StalenessConfig(3), 42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="StalenessConfig"):
        StalenessFilter(3)  # type: ignore[arg-type]


# --- threads -------------------------------------------------------------------------------


def test_several_producers_and_a_moving_learner_keep_the_books_exact() -> None:
    q: queue.Queue[object] = queue.Queue()
    f = make(staleness=3, sink=q)
    producers, per_producer, last_version = 6, 2000, 40
    start = threading.Barrier(producers + 1)

    def produce(seed: int) -> None:
        start.wait()
        for i in range(per_producer):
            # versions lag the learner by 0..7, so some are stale at put, some at get
            f.put(Tagged(seed, max(f.learner_version - (i + seed) % 8, 0)))

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
    for t in threads:
        t.start()
    start.wait()
    taken = 0
    for version in range(1, last_version + 1):
        f.advance(version)
        while not q.empty():
            try:
                item = f.get(timeout=0.01)
            except queue.Empty:
                break
            assert item.version >= f.learner_version - 3  # type: ignore[attr-defined]
            taken += 1
    for t in threads:
        t.join()
    while True:
        try:
            item = f.get(block=False)
        except queue.Empty:
            break
        assert item.version >= f.learner_version - 3  # type: ignore[attr-defined]
        taken += 1
    snap = f.snapshot()
    assert snap["staleness/generated"] == producers * per_producer
    assert snap["staleness/admitted"] == taken
    assert snap["staleness/pending"] == 0
    assert snap["staleness/admitted"] + snap["staleness/dropped"] == producers * per_producer
    assert sum(snap[f"staleness/age_hist/{k}"] for k in range(4)) == taken
    assert snap["staleness/age_hist/over"] == snap["staleness/dropped"]


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize("staleness", [3, 4, 5, 6])
def test_config_derives_kappa_inside_the_envelope_silently(staleness: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = StalenessConfig(staleness)
    assert config.kappa == staleness - 1 == kappa_for_staleness(staleness)
    assert StalenessConfig.from_kappa(config.kappa) == config


def test_config_refuses_s_below_3_unless_forced() -> None:
    with pytest.raises(UsageError, match="S >= 3") as excinfo:
        StalenessConfig(2)
    assert isinstance(excinfo.value, WanrlError) and isinstance(excinfo.value, ValueError)
    assert StalenessConfig(2, force=True).kappa == 1


@pytest.mark.parametrize("staleness", [0, 1, -3, 2.5, True, "4", None])
def test_config_refuses_what_no_force_can_fix(staleness: object) -> None:
    with pytest.raises(UsageError, match="staleness"):
        StalenessConfig(staleness, force=True)  # type: ignore[arg-type]


def test_config_warns_outside_the_stable_envelope_citing_the_page() -> None:
    with pytest.warns(StalenessEnvelopeWarning, match=r"S <= 6.*sizing-and-cost\.md"):
        config = StalenessConfig(MAX_STABLE_STALENESS + 1)
    assert config.kappa == MAX_STABLE_STALENESS
    assert stability_warning(MAX_STABLE_STALENESS) is None


def test_config_is_frozen() -> None:
    config = StalenessConfig(3)
    with pytest.raises(AttributeError):
        config.staleness = 4  # type: ignore[misc]


def test_kappa_helpers_round_trip_and_validate() -> None:
    assert staleness_for_kappa(kappa_for_staleness(5)) == 5
    with pytest.raises(UsageError, match="kappa"):
        staleness_for_kappa(0)
    with pytest.raises(UsageError, match="staleness"):
        kappa_for_staleness(1)


# --- properties ----------------------------------------------------------------------------

versions = st.integers(min_value=0, max_value=10_000)


@given(v_t=versions, staleness=st.integers(2, 20), tag=st.lists(versions, min_size=1, max_size=5))
@settings(max_examples=300)
def test_offer_matches_the_rule_on_the_oldest_version(
    v_t: int, staleness: int, tag: list[int]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StalenessEnvelopeWarning)
        f = StalenessFilter(StalenessConfig(staleness, force=True), learner_version=v_t)
    assert f.offer(Tagged(None, tuple(tag))) == (min(tag) >= v_t - staleness)
    assert f.age_of(Tagged(None, tuple(tag))) == v_t - min(tag)


@given(
    staleness=st.integers(3, 6),
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.integers(0, 12)),
            st.tuples(st.just("advance"), st.integers(0, 2)),
            st.tuples(st.just("get"), st.just(0)),
        ),
        max_size=60,
    ),
)
@settings(max_examples=200)
def test_books_balance_and_nothing_stale_is_ever_returned(
    staleness: int, ops: list[tuple[str, int]]
) -> None:
    q: queue.Queue[object] = queue.Queue()
    f = make(staleness=staleness, sink=q)
    returned = 0
    for op, arg in ops:
        if op == "put":
            f.put(Tagged(None, max(f.learner_version - arg, 0)))
        elif op == "advance":
            f.advance(f.learner_version + arg)
        else:
            try:
                item = f.get(block=False)
            except queue.Empty:
                continue
            assert item.version >= f.learner_version - staleness  # type: ignore[attr-defined]
            returned += 1
    snap = f.snapshot()
    assert snap["staleness/admitted"] == returned
    assert snap["staleness/pending"] == q.qsize()
    assert snap["staleness/generated"] == (
        snap["staleness/admitted"] + snap["staleness/dropped"] + snap["staleness/pending"]
    )
    assert sum(snap[f"staleness/age_hist/{k}"] for k in range(staleness + 1)) == returned
    assert 0.0 <= snap["staleness/admit_ratio"] <= 1.0


def test_the_module_imports_no_trainer_stack() -> None:
    code = (
        "import sys, wanrl_s3.staleness; "
        "loaded = [m for m in ('torch', 'ray', 'verl') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_offer_at_get_counts_drops_where_they_happen() -> None:
    f = StalenessFilter(StalenessConfig(staleness=3), learner_version=10)
    assert not f.offer("old", version=2, at_get=True)
    assert not f.offer("old", version=2)
    m = f.snapshot()
    assert m["staleness/dropped_at_get"] == 1 and m["staleness/dropped_at_put"] == 1
