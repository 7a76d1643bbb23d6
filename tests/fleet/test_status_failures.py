"""A failing worker's status object: shown at once, refreshed at a bounded rate, cleared.

On a real (SeaweedFS) bucket; the reporter's clock is a counter the test moves, so the
rate limit is checked exactly, not by sleeping.
"""

from __future__ import annotations

import threading

import pytest

from tests.fleet.test_status import install
from wanrl_s3 import (
    FailureSpan,
    RetryPolicy,
    StatusReporter,
    StoreError,
    WorkerStatus,
    WorkerStatusError,
    open_store,
)
from wanrl_s3.format import layout
from wanrl_s3.store import ObjectStore
from wanrl_s3.testing import Fault, FaultProxy, Rule


@pytest.fixture
def s3_store(s3_url: str, s3_endpoint: str) -> ObjectStore:
    return open_store(s3_url, endpoint_url=s3_endpoint)


class Ticks:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def stored(store: ObjectStore, worker_id: str) -> WorkerStatus:
    return WorkerStatus.from_json(store.get_bytes(layout.worker_status_key(worker_id)))


def test_failures_are_written_at_once_then_at_most_once_per_interval(s3_store) -> None:  # type: ignore[no-untyped-def]
    ticks = Ticks()
    reporter = StatusReporter(s3_store, "w1", failure_interval_s=10, monotonic=ticks)
    assert reporter.failing(None) is False  # nothing to clear: nothing written
    assert not s3_store.exists(layout.worker_status_key("w1"))
    assert reporter.failing("download of v2 failed: hash mismatch", at_s=50.0) is True
    first = stored(s3_store, "w1")
    assert first.last_error == "download of v2 failed: hash mismatch"
    assert first.last_error_at_s == 50.0
    written = [
        reporter.failing("download of v2 failed: hash mismatch", at_s=50.0 + i)
        for i in range(1, 100)  # a failure every poll, all within the interval
    ]
    assert not any(written) and stored(s3_store, "w1").updated_at_s == first.updated_at_s
    ticks.now_s += 10
    assert reporter.failing("download of v2 failed: hash mismatch", at_s=61.0) is True
    assert stored(s3_store, "w1").last_error_at_s == 61.0  # refreshed while it lasts
    ticks.now_s += 1
    assert reporter.failing(None) is False  # over, but the next write must wait
    ticks.now_s += 10
    assert reporter.failing(None) is True
    cleared = stored(s3_store, "w1")
    assert cleared.last_error is None and cleared.last_error_at_s is None


def test_an_install_clears_the_error_and_a_hook_error_outlives_background_recovery(
    s3_store,  # type: ignore[no-untyped-def]
) -> None:
    ticks = Ticks()
    reporter = StatusReporter(s3_store, "w2", failure_interval_s=10, monotonic=ticks)
    reporter.failing("reading LATEST failed: nests deeper than 32 levels")
    reporter.installed(install(3, at_s=100.0))
    status = stored(s3_store, "w2")
    assert status.installed_version == 3 and status.last_error is None
    reporter.error("--on-install exited 1 after v3")
    ticks.now_s += 60
    assert reporter.failing(None) is False  # not a background failure: kept until an install
    assert stored(s3_store, "w2").last_error == "--on-install exited 1 after v3"


def test_failures_the_bucket_could_not_take_are_written_once_it_can(
    s3_url: str, s3_endpoint: str
) -> None:
    """The bucket is down: the failure cannot be written, and the install that follows
    the outage would clear ``last_error``; the stretch of failures outlives both."""
    ticks = Ticks()
    with FaultProxy(s3_endpoint) as proxy:
        store = open_store(s3_url, endpoint_url=proxy.url, retry=RetryPolicy(max_attempts=1))
        reporter = StatusReporter(store, "w3", failure_interval_s=10, monotonic=ticks)
        proxy.set_rules([Rule(Fault.INTERNAL_ERROR, method="PUT", key="/workers/")])
        with pytest.raises(StoreError):
            reporter.failing("reading LATEST failed: 500", at_s=50.0)
        assert reporter.failing("reading LATEST failed: 500", at_s=50.0) is False  # seen again
        assert reporter.failing("reading LATEST failed: 503", at_s=52.5) is False  # rate-limited
        assert reporter.failing(None) is False  # over; its write waits for the interval
        proxy.clear()
        reporter.installed(install(4, at_s=60.0))
    status = stored(open_store(s3_url, endpoint_url=s3_endpoint), "w3")
    assert status.installed_version == 4 and status.last_error is None
    (span,) = status.failures
    assert (span.first_at_s, span.last_at_s, span.count) == (50.0, 52.5, 2)
    assert span.message == "reading LATEST failed: 503" and span.ended_at_s is not None
    assert span.overlaps(52.0, 53.0) and not span.overlaps(span.ended_at_s + 1, 1e12)


def test_a_failure_told_as_it_happens_counts_though_no_look_at_the_current_one_saw_it(
    s3_store: ObjectStore,
) -> None:
    """A worker's poll failed and recovered while its serving loop was installing: only
    the watcher's observer, which calls ``failed`` from the poll thread, saw it."""
    reporter = StatusReporter(s3_store, "w5", failure_interval_s=10, monotonic=Ticks())
    told = threading.Thread(target=reporter.failed, args=("reading LATEST failed: 500", 70.0))
    told.start()
    told.join()
    reporter.failed("reading LATEST failed: 500", 70.0)  # the same failure, told again
    assert reporter.failing(None) is False  # the loop's next look: it is over already
    reporter.installed(install(5, at_s=80.0))
    (span,) = stored(s3_store, "w5").failures
    assert (span.first_at_s, span.last_at_s, span.count) == (70.0, 70.0, 1)
    assert span.ended_at_s is not None and span.ended_at_s >= 70.0


def test_a_restarted_worker_keeps_its_failure_stretches_and_ends_the_open_one(
    s3_store: ObjectStore,
) -> None:
    ticks = Ticks()
    first = StatusReporter(s3_store, "w4", failure_interval_s=0, monotonic=ticks)
    first.failing("download of v2 failed: reset", at_s=10.0)
    first.failing(None)
    first.failing("reading LATEST failed: 500", at_s=20.0)  # then the process dies
    died_at = stored(s3_store, "w4").updated_at_s
    StatusReporter(s3_store, "w4").restore()
    old, still_open = stored(s3_store, "w4").failures
    assert old.ended_at_s is not None and old.message == "download of v2 failed: reset"
    assert still_open == FailureSpan(20.0, 20.0, 1, "reading LATEST failed: 500", died_at)


@pytest.mark.parametrize(
    "data",
    [
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "x": '
        + b"[" * 30_000
        + b"]" * 30_000
        + b"}",
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "x": "'
        + b"a" * (5 * 2**20)
        + b'"}',
    ],
    ids=["deep", "huge"],
)
def test_a_hostile_status_object_is_a_status_error_not_a_crash(data: bytes) -> None:
    with pytest.raises(WorkerStatusError, match="malformed worker status object"):
        WorkerStatus.from_json(data)


def test_an_install_ends_the_open_stretch_though_no_look_saw_the_failure_end(
    s3_store: ObjectStore,
) -> None:
    """The poll failed (told by the observer) and the next one went on to install: the
    serving loop never said the failure was over, the install is that proof."""
    reporter = StatusReporter(s3_store, "w6", failure_interval_s=10, monotonic=Ticks())
    reporter.failed("reading LATEST failed: InternalError", 90.0)
    reporter.installed(install(6, at_s=95.0))
    (span,) = stored(s3_store, "w6").failures
    assert span.count == 1 and span.ended_at_s is not None and span.ended_at_s >= 90.0


def test_a_failure_told_again_after_a_newer_one_still_counts_once(s3_store: ObjectStore) -> None:
    """The observer tells a poll failure, then a download failure; the serving loop, which
    looked before the second, then reports the first: three calls, two failures."""
    reporter = StatusReporter(s3_store, "w7", failure_interval_s=0, monotonic=Ticks())
    reporter.failed("reading LATEST failed: 500", 100.0)
    reporter.failed("download of v3 failed: reset", 100.5)
    reporter.failing("reading LATEST failed: 500", at_s=100.0)
    (span,) = stored(s3_store, "w7").failures
    assert (span.first_at_s, span.last_at_s, span.count) == (100.0, 100.5, 2)
