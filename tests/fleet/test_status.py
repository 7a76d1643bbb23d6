"""Worker status objects in a real (SeaweedFS) bucket: written, read back, broken ones skipped."""

from __future__ import annotations

import pytest

from wanrl_s3 import (
    InstallResult,
    StatusReporter,
    WorkerStatus,
    WorkerStatusError,
    open_store,
    read_statuses,
)
from wanrl_s3.errors import ManifestError, VerificationError
from wanrl_s3.store import ObjectStore


@pytest.fixture
def s3_store(s3_url: str, s3_endpoint: str) -> ObjectStore:
    return open_store(s3_url, endpoint_url=s3_endpoint)


def install(version: int, at_s: float) -> InstallResult:
    return InstallResult(
        version=version,
        tensors=3,
        path=(version,),
        downloaded_bytes=1000 * version,
        published_at_s=at_s - 5.0,
        seen_at_s=at_s - 4.0,
        ready_at_s=at_s - 1.0,
        installed_at_s=at_s,
        download_s=2.5,
        verify_s=0.25,
        apply_s=0.125,
    )


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1, 2]",  # JSON, but not an object
        b'{"format": "wanrl-s3/manifest", "worker_id": "w"}',  # another format
        b'{"format": "wanrl-s3/worker-status"}',  # no worker id
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "updated_at_s": "soon"}',
        # what its readers would crash on: each field of the wrong type
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "installs": "x"}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "installs": [1]}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "installs": [{"version": 1}]}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "installed_version": "3"}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "absences": "ab"}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "last_error": 5}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": 7}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "round_trip_s": NaN}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "failures": {}}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "failures": [[1, 2]]}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "failures": [{"count": 1}]}',
        b'{"format": "wanrl-s3/worker-status", "worker_id": "w", "failures": [{"first_at_s": 1,'
        b' "last_at_s": 2, "count": 1.5, "message": "x"}]}',
    ],
)
def test_a_malformed_status_object_raises_a_status_error(data: bytes) -> None:
    with pytest.raises(WorkerStatusError, match="malformed worker status object") as caught:
        WorkerStatus.from_json(data)
    assert isinstance(caught.value, VerificationError) and isinstance(caught.value, ValueError)
    assert not isinstance(caught.value, ManifestError)  # it is not a manifest
    assert caught.value.exit_code == 3


def test_reports_round_trip_with_an_integrations_fields(s3_store: ObjectStore) -> None:
    reporter = StatusReporter(s3_store, "verl-a", region="eu")
    reporter.installed(install(1, at_s=100.0), extra={"steps": {"1": 1}})
    reporter.error("download failed")  # keeps the integration's fields
    (status,) = read_statuses(s3_store)
    assert (status.worker_id, status.region, status.installed_version) == ("verl-a", "eu", 1)
    assert status.last_error == "download failed" and status.downloaded_bytes_total == 1000
    assert status.installs[0]["installed_at_s"] == 100.0
    assert dict(status.extra) == {"steps": {"1": 1}}
    reporter.annotate({"steps": {"1": 1, "2": None}})
    assert dict(read_statuses(s3_store)[0].extra) == {"steps": {"1": 1, "2": None}}


def test_resume_is_the_old_name_of_restore(
    s3_store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wanrl_s3 import _exports

    StatusReporter(s3_store, "w-old").installed(install(3, at_s=50.0))
    monkeypatch.setattr(_exports, "_warned", set())
    with pytest.warns(DeprecationWarning, match=r"StatusReporter\.resume is deprecated"):
        StatusReporter(s3_store, "w-old").resume(now_s=60.0)
    (status,) = read_statuses(s3_store)
    assert status.installed_version == 3  # the history restored, as restore() does


def test_read_statuses_skips_broken_objects_and_filters_by_prefix(s3_store: ObjectStore) -> None:
    for worker_id in ("verl-b", "verl-a", "plain-1"):
        StatusReporter(s3_store, worker_id).installed(install(2, at_s=50.0))
    s3_store.put_bytes("workers/verl-broken.json", b'{"format": "something else"}')
    s3_store.put_bytes("workers/notes.txt", b"not a status object, not even .json")
    every = read_statuses(s3_store)
    assert [s.worker_id for s in every] == ["plain-1", "verl-a", "verl-b"]
    assert [s.worker_id for s in read_statuses(s3_store, worker_prefix="verl-")] == [
        "verl-a",
        "verl-b",
    ]
    assert all(s.extra == {} for s in every)  # nothing invented for plain workers


def test_a_reporter_refuses_a_worker_id_that_is_no_key(s3_store: ObjectStore) -> None:
    from wanrl_s3 import UsageError, check_worker_id

    with pytest.raises(UsageError, match="worker id 'a/b' must be 1-128 characters"):
        StatusReporter(s3_store, "a/b")
    assert check_worker_id("verl-host-12") == "verl-host-12"
    with pytest.raises(UsageError, match="worker id ''"):
        check_worker_id("")
