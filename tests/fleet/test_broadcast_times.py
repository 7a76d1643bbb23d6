"""Broadcast times a user can trust (fleet/broadcast_times.py), each rule on status objects
in a real S3 bucket.

The statuses are written as the worker writes them (JSON objects under workers/),
read back with read_statuses, and reported at a fixed ``now_s`` so that expiry is
exact. Times are seconds on a made-up clock starting at T0.
"""

from __future__ import annotations

from typing import Any

import pytest

from wanrl_s3 import InstallResult, StatusReporter, WorkerStatus, open_store, read_statuses
from wanrl_s3.fleet.broadcast_times import (
    fleet_report,
    prune_expired,
    read_records,
    record_broadcast_times,
    record_key,
)
from wanrl_s3.format import layout
from wanrl_s3.store import ObjectStore

T0 = 1_000_000.0


@pytest.fixture
def store(s3_url: str, s3_endpoint: str) -> ObjectStore:
    return open_store(s3_url, endpoint_url=s3_endpoint)


def install(version: int, at_s: float, published_s: float) -> dict[str, Any]:
    return InstallResult(
        version=version,
        tensors=1,
        path=(version,),
        downloaded_bytes=1_000_000,
        published_at_s=published_s,
        seen_at_s=published_s + 0.5,
        ready_at_s=at_s - 0.1,
        installed_at_s=at_s,
        download_s=1.0,
        verify_s=0.05,
        apply_s=0.05,
    ).to_dict()


def put(store: ObjectStore, worker_id: str, **fields: Any) -> None:
    """A worker's status object as it would write it."""
    fields.setdefault("started_at_s", T0)
    fields.setdefault("updated_at_s", T0)
    store.put_bytes(
        layout.worker_status_key(worker_id), WorkerStatus(worker_id=worker_id, **fields).to_json()
    )


def report(store: ObjectStore, published: dict[int, float], now_s: float, **kw: Any):
    return fleet_report(read_statuses(store), published, max(published), 0.9, now_s=now_s, **kw)


def test_a_skipped_version_is_reached_when_a_newer_one_is_installed(store: ObjectStore) -> None:
    published = {14: T0 + 10, 15: T0 + 20, 16: T0 + 30, 17: T0 + 40}
    installs = (install(14, T0 + 12, T0 + 10), install(17, T0 + 43, T0 + 40))
    put(store, "jumper", installed_version=17, installs=installs, updated_at_s=T0 + 43)
    v15 = report(store, published, now_s=T0 + 50).versions[1]
    assert (v15.version, v15.installed, v15.workers) == (15, 1, 1)
    assert v15.t_bcast_s == pytest.approx(23.0)  # reached at v17's install, not v14's
    assert v15.seen_s is None  # it never saw v15 itself in LATEST


def test_a_worker_that_joins_later_does_not_change_an_earlier_figure(store: ObjectStore) -> None:
    published = {1: T0 + 10, 2: T0 + 100}
    put(store, "early", installed_version=1, installs=(install(1, T0 + 13.8, T0 + 10),))
    before = report(store, published, now_s=T0 + 60).versions[0]
    put(
        store,
        "late",
        started_at_s=T0 + 50,
        updated_at_s=T0 + 112,
        installed_version=2,
        installs=(install(2, T0 + 112, T0 + 100),),
    )
    after = report(store, published, now_s=T0 + 120)
    assert before.t_bcast_s == after.versions[0].t_bcast_s == pytest.approx(3.8)
    assert after.versions[0].members == ("early",)
    assert after.versions[1].members == ("early", "late")  # both running at v2's commit
    assert after.expired == () and after.lagging == ("early",)


def test_expired_workers_are_not_lagging_and_not_in_later_fleets(store: ObjectStore) -> None:
    put(store, "alive", installed_version=3, updated_at_s=T0 + 1000)
    put(store, "dead", installed_version=1, updated_at_s=T0 + 5)
    published = {3: T0 + 900}
    rep = report(store, published, now_s=T0 + 1000, expire_after_s=300.0)
    assert rep.expired == ("dead",) and rep.lagging == ()
    assert rep.versions[0].members == ("alive",)
    assert prune_expired(store, rep) == ["dead"]
    assert [s.worker_id for s in read_statuses(store)] == ["alive"]


def test_a_worker_silent_but_not_yet_expired_still_counts(store: ObjectStore) -> None:
    """Alive at the commit, it has not written since: it is in the fleet until it expires."""
    put(store, "quiet", installed_version=1, updated_at_s=T0 + 80)
    published = {2: T0 + 100}
    rep = report(store, published, now_s=T0 + 150, expire_after_s=300.0)
    assert rep.versions[0].members == ("quiet",) and rep.lagging == ("quiet",)
    rep = report(store, published, now_s=T0 + 400, expire_after_s=300.0)
    assert rep.versions[0].members == () and rep.expired == ("quiet",)


def test_a_measured_figure_is_frozen_and_survives_pruning(store: ObjectStore) -> None:
    published = {5: T0 + 100}
    for n in range(10):
        put(
            store,
            f"w{n}",
            installed_version=5,
            updated_at_s=T0 + 200,
            installs=(install(5, T0 + 101 + n, T0 + 100),),
        )
    first = record_broadcast_times(store, report(store, published, now_s=T0 + 200))
    assert first.recorded_now == (5,) and first.report.versions[0].recorded
    assert first.report.versions[0].t_bcast_s == pytest.approx(9.0)  # the 9th of 10
    assert store.exists(record_key(5, 0.9))
    store.delete([layout.worker_status_key(f"w{n}") for n in range(5)])  # pruned
    records = read_records(store, [5], 0.9)
    later = report(store, published, now_s=T0 + 300, records=records).versions[0]
    assert later.recorded and later.t_bcast_s == pytest.approx(9.0) and later.workers == 10
    assert later.installed == 5 and later.tail_s is None  # live: five members are gone
    again = record_broadcast_times(store, report(store, published, now_s=T0 + 300))
    assert again.recorded_now == ()  # once


def test_a_restart_under_the_same_id_keeps_history_and_records_the_gap(
    store: ObjectStore,
) -> None:
    first = StatusReporter(store, "gpu-7")
    first.restore(round_trip_s=0.04, now_s=T0)
    first.installed(InstallResult(**{**install(1, T0 + 5, T0 + 1), "path": (1,)}))
    down_since = read_statuses(store)[0].updated_at_s
    again = StatusReporter(store, "gpu-7")
    again.restore(round_trip_s=0.05, now_s=down_since + 60)
    (status,) = read_statuses(store)
    assert status.started_at_s == T0 and status.installed_version == 1
    assert len(status.installs) == 1 and status.round_trip_s == 0.05
    assert status.absences == ((down_since, down_since + 60),)
    published = {2: down_since + 30}  # published while it was down
    rep = fleet_report([status], published, 2, now_s=down_since + 61)
    assert rep.versions[0].members == ()


def test_an_idle_worker_writes_a_heartbeat_no_more_often_than_asked(store: ObjectStore) -> None:
    clock = {"t": 0.0}
    reporter = StatusReporter(store, "idle", heartbeat_s=60.0, monotonic=lambda: clock["t"])
    reporter.restore()
    assert not reporter.heartbeat()
    clock["t"] = 59.0
    assert not reporter.heartbeat()
    clock["t"] = 61.0
    stamp = read_statuses(store)[0].updated_at_s
    assert reporter.heartbeat() and read_statuses(store)[0].updated_at_s > stamp
