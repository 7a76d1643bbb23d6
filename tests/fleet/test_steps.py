"""A trainer's step tag, mapped to the oldest version any rollout worker held at that step."""

from __future__ import annotations

import uuid

import pytest

from wanrl_s3 import StepStatusWriter, VersionMap, read_statuses
from wanrl_s3.errors import UsageError
from wanrl_s3.store import ObjectStore, open_store


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}")


def record(store: ObjectStore, worker_id: str, steps: dict[int, int | None], **kw: int) -> None:
    writer = StepStatusWriter(store, worker_id, **kw)
    for step, version in steps.items():
        writer.synced(step, version)
    writer.flush(60)
    writer.close()


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_the_oldest_version_any_worker_held_and_the_step_before_an_unseen_one(
    store: ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    record(store, "rollout-a", {0: None, 1: 0, 2: 2, 5: 4})
    record(store, "rollout-b", {1: 1, 2: 1})
    record(store, "other-c", {2: 0})  # another run's workers, by prefix
    versions = VersionMap(store, worker_prefix="rollout-")
    # step 5: a alone recorded it; step 6: each worker's newest step before it stands in
    assert [versions.true_version(s) for s in range(7)] == [0, 0, 1, 1, 1, 4, 1]
    assert {w.worker_id for w in versions.workers} == {"rollout-a", "rollout-b"}
    assert VersionMap(store).true_version(2) == 0  # with every worker, c's 0 is the oldest
    empty = VersionMap(open_store(f"memory://{uuid.uuid4().hex}"))
    assert empty.true_version(9) == 0 and empty.true_version(10) == 0
    assert caplog.text.count("no rollout worker has recorded what it held at step 9") == 1


def test_a_worker_remembers_its_newest_steps_and_the_status_stays_readable(
    store: ObjectStore,
) -> None:
    record(store, "w", {s: s for s in range(10)}, kept=4)
    (status,) = read_statuses(store)
    assert status.extra["steps"] == {"6": 6, "7": 7, "8": 8, "9": 9}


def test_the_map_is_reread_on_its_clock(store: ObjectStore) -> None:
    clock = Clock()
    record(store, "w", {0: 0})
    versions = VersionMap(store, refresh_s=5.0, min_refresh_s=1.0, clock=clock)
    assert versions.true_version(0) == 0
    record(store, "w2", {0: None, 1: 1})
    assert versions.true_version(1) == 0  # an unseen step, but read less than 1 s ago
    clock.now_s += 1.0
    assert versions.true_version(1) == 1  # unseen, and 1 s old: read again
    record(store, "w3", {1: 0})
    assert versions.true_version(1) == 1  # seen: kept until refresh_s
    clock.now_s += 5.0
    assert versions.true_version(1) == 0


def test_bad_settings_are_refused(store: ObjectStore) -> None:
    with pytest.raises(UsageError, match="refresh_s"):
        VersionMap(store, refresh_s=-1)
    with pytest.raises(UsageError, match="at least one store"):
        VersionMap([])
