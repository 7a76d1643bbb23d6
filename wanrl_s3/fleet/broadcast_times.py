"""Broadcast times a user can trust: each version's T_bcast measured from the workers'
status objects against the fleet it was published to, and recorded in the bucket once.

The capacity rule needs T_bcast at a fraction f of *the fleet*, so the fleet
has to be pinned down, per version:

- **The fleet of a version** is the workers alive when it was published: the
  worker had started (``started_at_s``, kept across restarts under one worker
  id) before the manifest's commit, the commit does not fall in one of its
  recorded absences, and it showed a sign of life (a status write; idle workers
  write a heartbeat) at or after the commit, or has not been silent long enough
  to count as gone yet (``expire_after_s``). A worker that joins later is not
  in it, so it cannot change the figure after the fact; a worker that died
  before the commit is not in it once it has expired.
- **Reached** means installed that version or anything newer (a worker that
  jumps from v14 to v17 reached v15 when it installed v17, not before).
- **T_bcast** is the time from the commit until ceil(f * N) of those N workers
  had reached it; the tail, until the last one did (live: ``-`` while any
  member has not).
- **Recorded**: the first report that measures a version's T_bcast writes a
  record (``fleet/bcast/<version>-f<fraction>.json``, create-only) with the
  members and the figure; later reports use it, so pruning dead workers or a
  worker's install history rolling over never rewrites a measured figure.
- **Expired** workers (silent for ``expire_after_s``) are listed apart, are
  never LAGGING, and may be pruned (:func:`prune_expired`).

Times are wall clock from different machines: keep them NTP-synchronised.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..errors import (
    ObjectTooLargeError,
    PreconditionFailedError,
    StoreError,
    UsageError,
    WorkerStatusError,
)
from ..format import layout
from ..format.manifest import load_bounded_json
from ..store import ObjectStore
from ..units import require_positive
from .status import WorkerStatus

#: A worker silent this long is gone: five missed heartbeats (HEARTBEAT_S in status.py).
EXPIRE_AFTER_S = 300.0
# the bucket's names for the records (docs/operations.md): a wire format, kept as written
RECORDS_DIR = "fleet/bcast"
RECORD_FORMAT = "wanrl-s3/bcast-record"
MAX_RECORD_BYTES = 1 << 22


def quantile_count(workers: int, fraction: float) -> int:
    """Workers that make up ``fraction`` of ``workers``: ceil(f * N), at least one."""
    if not (isinstance(fraction, (int, float)) and 0.0 < fraction <= 1.0):
        raise UsageError(f"fraction must be in (0, 1], got {fraction}")
    return max(1, math.ceil(fraction * workers - 1e-9))


def t_bcast_at(
    reached_at_s: Iterable[float], workers: int, fraction: float, published_at_s: float
) -> float | None:
    """Seconds from the commit until ``fraction`` of ``workers`` had reached the version
    (``reached_at_s``: when each of those that did reached it); None until enough did."""
    reached = sorted(reached_at_s)
    if not workers or len(reached) < quantile_count(workers, fraction):
        return None
    return reached[quantile_count(workers, fraction) - 1] - published_at_s


def is_expired(status: WorkerStatus, now_s: float, expire_after_s: float) -> bool:
    """Silent for ``expire_after_s``: stopped, crashed or cut off."""
    return now_s - status.updated_at_s >= expire_after_s


def is_member(
    status: WorkerStatus, published_at_s: float, now_s: float, expire_after_s: float
) -> bool:
    """Whether the worker was alive when the version was published (see the module doc)."""
    started = status.started_at_s
    if started is not None and started > published_at_s:
        return False
    if any(lo <= published_at_s < hi for lo, hi in status.absences):
        return False
    if status.updated_at_s >= published_at_s:
        return True
    return status.updated_at_s >= published_at_s - expire_after_s and not is_expired(
        status, now_s, expire_after_s
    )


@dataclass(frozen=True)
class BroadcastRecord:
    """A version's measured T_bcast at one fraction, with the fleet it was measured on."""

    version: int
    fraction: float
    published_at_s: float
    members: tuple[str, ...]
    t_bcast_s: float

    @property
    def key(self) -> str:
        return record_key(self.version, self.fraction)

    def to_json(self) -> bytes:
        return json.dumps({"format": RECORD_FORMAT, **asdict(self)}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> BroadcastRecord:
        try:
            d = load_bounded_json(data, "T_bcast record", MAX_RECORD_BYTES)
            if d.pop("format", None) != RECORD_FORMAT:
                raise ValueError(f"format is not {RECORD_FORMAT!r}")
            d["members"] = tuple(str(m) for m in d["members"])
            return cls(**d)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WorkerStatusError(f"malformed T_bcast record: {exc}") from exc


def record_key(version: int, fraction: float) -> str:
    return f"{RECORDS_DIR}/{version:012d}-f{round(fraction * 1000):04d}.json"


@dataclass(frozen=True)
class VersionSpread:
    version: int
    published_at_s: float
    installed: int  # members that reached it (installed it or newer)
    workers: int  # members: the workers alive when it was published
    t_bcast_s: float | None  # when `fraction` of the members had it; None if not yet
    tail_s: float | None  # from then until the last member had it; None until all did
    seen_s: float | None  # median time from publish until members saw it in LATEST
    recorded: bool = False  # t_bcast_s comes from its record in the bucket and will not change
    members: tuple[str, ...] = ()  # the worker ids of its fleet


@dataclass(frozen=True)
class FleetReport:
    fraction: float
    latest: int | None
    versions: tuple[VersionSpread, ...]
    lagging: tuple[str, ...]  # alive, and not at the latest version
    workers: tuple[WorkerStatus, ...] = field(default=())
    expired: tuple[str, ...] = field(default=())  # silent for expire_after_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "latest": self.latest,
            "versions": [asdict(v) for v in self.versions],
            "lagging": list(self.lagging),
            "expired": list(self.expired),
            "workers": [
                {
                    "worker_id": w.worker_id,
                    "region": w.region,
                    "installed_version": w.installed_version,
                    "updated_at_s": w.updated_at_s,
                    "started_at_s": w.started_at_s,
                    "round_trip_s": w.round_trip_s,
                    "last_error": w.last_error,
                    "last_error_at_s": w.last_error_at_s,
                    "failures": [f.to_dict() for f in w.failures],
                    "fallback": w.fallback,
                }
                for w in self.workers
            ],
        }


@dataclass(frozen=True)
class _Clock:
    now_s: float
    expire_after_s: float


def spread(
    version: int,
    published_at_s: float,
    statuses: Iterable[WorkerStatus],
    fraction: float,
    *,
    now_s: float | None = None,
    expire_after_s: float = EXPIRE_AFTER_S,
    record: BroadcastRecord | None = None,
) -> VersionSpread:
    """One version's spread over its fleet (the record's, once there is one)."""
    clock = _Clock(time.time() if now_s is None else now_s, expire_after_s)
    by_id = {s.worker_id: s for s in statuses}
    if record is not None:
        members = list(record.members)
    else:
        members = [
            s.worker_id
            for s in by_id.values()
            if is_member(s, published_at_s, clock.now_s, clock.expire_after_s)
        ]
    reached = sorted(
        t for t in (by_id[m].installed_at(version) for m in members if m in by_id) if t is not None
    )
    n = len(members)
    t_bcast = record.t_bcast_s if record is not None else None
    if t_bcast is None:
        t_bcast = t_bcast_at(reached, n, fraction, published_at_s)
    tail = None
    if t_bcast is not None and n and len(reached) == n:
        tail = max(0.0, reached[-1] - published_at_s - t_bcast)
    seen = [
        i["seen_at_s"] - published_at_s
        for m in members
        if m in by_id
        for i in by_id[m].installs
        if i["version"] == version
    ]
    return VersionSpread(
        version,
        published_at_s,
        len(reached),
        n,
        t_bcast,
        tail,
        statistics.median(seen) if seen else None,
        record is not None,
        tuple(members),
    )


def fleet_report(
    statuses: list[WorkerStatus],
    published_at_s: Mapping[int, float],
    latest: int | None,
    fraction: float = 0.9,
    *,
    now_s: float | None = None,
    expire_after_s: float = EXPIRE_AFTER_S,
    records: Mapping[int, BroadcastRecord] | None = None,
) -> FleetReport:
    """Per version: its fleet, T_bcast at ``fraction`` of it, the tail; who lags, who is gone."""
    quantile_count(1, fraction)
    require_positive("expire_after_s", expire_after_s)
    now = time.time() if now_s is None else now_s
    records = records or {}
    versions = tuple(
        spread(
            v,
            published_at_s[v],
            statuses,
            fraction,
            now_s=now,
            expire_after_s=expire_after_s,
            record=records.get(v),
        )
        for v in sorted(published_at_s)
    )
    expired = tuple(s.worker_id for s in statuses if is_expired(s, now, expire_after_s))
    lagging = tuple(
        s.worker_id
        for s in statuses
        if latest is not None
        and s.worker_id not in expired
        and (s.installed_version is None or s.installed_version < latest)
    )
    return FleetReport(fraction, latest, versions, lagging, tuple(statuses), expired)


def new_records(report: FleetReport) -> list[BroadcastRecord]:
    """Records for the versions this report measured for the first time."""
    return [
        BroadcastRecord(v.version, report.fraction, v.published_at_s, v.members, v.t_bcast_s)
        for v in report.versions
        if not v.recorded and v.t_bcast_s is not None
    ]


def read_records(
    store: ObjectStore, versions: Iterable[int], fraction: float
) -> dict[int, BroadcastRecord]:
    """The recorded figures of ``versions`` at ``fraction``; a malformed one is ignored."""
    wanted = {record_key(v, fraction): v for v in versions}
    found = {}
    for info in store.list(f"{RECORDS_DIR}/"):
        if info.key in wanted:
            try:
                data = store.get_bytes(info.key, max_bytes=MAX_RECORD_BYTES)
                found[wanted[info.key]] = BroadcastRecord.from_json(data)
            except (WorkerStatusError, ObjectTooLargeError):  # malformed, or far too large
                continue
    return found


def write_records(store: ObjectStore, records: Iterable[BroadcastRecord]) -> list[BroadcastRecord]:
    """Write each record only if absent (a racing reporter's figure wins); returns those written."""
    written = []
    for record in records:
        try:
            store.put_bytes(record.key, record.to_json(), if_none_match=True)
        except PreconditionFailedError:
            continue
        written.append(record)
    return written


def prune_expired(store: ObjectStore, report: FleetReport) -> list[str]:
    """Delete the status objects of the expired workers; returns their ids.

    Their installs no longer count for versions measured later; versions already
    measured keep their recorded figure.
    """
    keys = [layout.worker_status_key(w) for w in report.expired]
    if keys:
        store.delete(keys)
    return list(report.expired)


@dataclass(frozen=True)
class RecordedReport:
    """What ``wanrl-s3 status`` shows, and whether it could record what it measured."""

    report: FleetReport
    recorded_now: tuple[int, ...]
    record_error: str | None


def record_broadcast_times(store: ObjectStore, report: FleetReport) -> RecordedReport:
    """Write the records this report measured first; a store that refuses is reported.

    A reader without write access still gets its report, with the reason the
    figures were not recorded (they are computed again, the same way, next time).
    """
    try:
        written = {r.version for r in write_records(store, new_records(report))}
    except StoreError as exc:
        return RecordedReport(report, (), f"figures not recorded ({exc})")
    versions = tuple(
        replace(v, recorded=v.recorded or v.version in written) for v in report.versions
    )
    return RecordedReport(replace(report, versions=versions), tuple(sorted(written)), None)
