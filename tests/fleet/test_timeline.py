"""The series `wanrl-s3 status --plot` draws (fleet/timeline.py), checked against the status
objects they come from: pure, on a made-up clock, no drawing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fleet.test_broadcast_times import T0, install
from wanrl_s3 import WorkerStatus
from wanrl_s3.fleet.broadcast_times import fleet_report
from wanrl_s3.fleet.timeline import FLEET, fleet_timeline, held_at

PUBLISHED = {1: T0 + 10.0, 2: T0 + 100.0, 3: T0 + 200.0}
NOW = T0 + 300.0


def worker(worker_id: str, region: str, installs: dict[int, float], **fields: Any) -> WorkerStatus:
    return WorkerStatus(
        worker_id=worker_id,
        region=region,
        installed_version=max(installs, default=None),
        installs=tuple(install(v, at, PUBLISHED[v]) for v, at in sorted(installs.items())),
        started_at_s=T0,
        updated_at_s=fields.pop("updated_at_s", NOW - 5),
        **fields,
    )


FLEET_STATUSES = [
    worker("eu-a", "eu", {1: T0 + 12, 2: T0 + 104, 3: T0 + 203}),
    worker("eu-b", "eu", {1: T0 + 15, 2: T0 + 120}),  # not at v3 yet
    worker("us-a", "us", {1: T0 + 30, 3: T0 + 260}),  # jumped from v1 to v3
    worker(
        "us-b",
        "us",
        {1: T0 + 40},
        last_error="download of v2 failed: hash mismatch",
        last_error_at_s=T0 + 150,
    ),
]


def timeline(fraction: float = 0.5):
    report = fleet_report(FLEET_STATUSES, PUBLISHED, 3, fraction, now_s=NOW)
    return report, fleet_timeline(report)


def test_each_workers_line_is_its_installs_held_until_its_last_status_write() -> None:
    _, line = timeline()
    assert line.t0_s == PUBLISHED[1]
    by_id = {w.label: w for w in line.workers}
    assert set(by_id) == {s.worker_id for s in FLEET_STATUSES}
    for status in FLEET_STATUSES:
        series = by_id[status.worker_id]
        installs = [(i["installed_at_s"] - line.t0_s, float(i["version"])) for i in status.installs]
        held = (status.updated_at_s - line.t0_s, float(status.installed_version or 0))
        assert list(zip(series.x, series.y, strict=True)) == [*installs, held]
    assert line.published.x == (0.0, 90.0, 190.0) and line.published.y == (1.0, 2.0, 3.0)


def test_a_failure_is_marked_at_its_time_and_the_version_then_held() -> None:
    _, line = timeline()
    assert line.failures.x == (140.0,) and line.failures.y == (1.0,)  # us-b held v1 at T0 + 150
    assert held_at(FLEET_STATUSES[2], T0 + 259) == 1 and held_at(FLEET_STATUSES[2], T0 + 260) == 3
    assert held_at(FLEET_STATUSES[0], T0) is None


def test_t_bcast_per_version_for_the_fleet_and_per_region() -> None:
    report, line = timeline(fraction=0.5)
    lines = {s.label: s for s in line.bcast}
    assert list(lines) == [FLEET, "eu", "us"]
    fleet = {v.version: v.t_bcast_s for v in report.versions if v.t_bcast_s is not None}
    assert dict(zip(lines[FLEET].x, lines[FLEET].y, strict=True)) == {
        float(v): t for v, t in fleet.items()
    }
    # half of each region's two workers: the first of them to reach the version
    assert dict(zip(lines["eu"].x, lines["eu"].y, strict=True)) == {1.0: 2.0, 2.0: 4.0, 3.0: 3.0}
    assert dict(zip(lines["us"].x, lines["us"].y, strict=True)) == {
        1.0: 20.0,
        2.0: 160.0,  # us-a reached v2 when it installed v3
        3.0: 60.0,
    }
    # at 100% a region where a worker has not reached a version has no point for it
    _, full = timeline(fraction=1.0)
    eu = {s.label: s for s in full.bcast}["eu"]
    assert eu.x == (1.0, 2.0) and eu.y == pytest.approx((5.0, 20.0))
