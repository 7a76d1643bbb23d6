"""Fleet status: each worker's status object, and T_bcast as the fleet saw it.

Every worker writes ``<prefix>/workers/<id>.json`` after each install and
while it fails: its installed version, the timings of its recent installs,
bytes moved, its last error and when it happened, the region it reads from
and, while that is not its own (a fallback from a lagging region), why. A
failing worker rewrites it at most once per ``failure_interval_s``
(:meth:`StatusReporter.failing`), so that its status stays fresh without
hammering the bucket; the next install clears the error.

The error alone would hide an outage of the bucket itself: while it lasts the
worker cannot write, and the install that follows clears the error. So each
stretch of failures is also kept as a :class:`FailureSpan` (first and last
failure, how many, when it ended), which installs do not clear: the next write
that gets through carries it.

:func:`~wanrl_s3.fleet.broadcast_times.fleet_report` turns those into, per version,
T_bcast over the workers alive when it was published (see fleet/broadcast_times.py). Idle
workers rewrite their object every ``HEARTBEAT_S`` so that silence means gone, and
a worker restarted under its id keeps its history (:meth:`StatusReporter.restore`).

Times are wall-clock seconds from different machines (publisher and
workers); their clocks must be synchronised (NTP) for T_bcast to mean much.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .._exports import warn_renamed
from ..errors import NotFoundError, VerificationError, WorkerStatusError
from ..fetch.watch import InstallResult
from ..format import layout
from ..format.manifest import load_bounded_json
from ..store import ObjectStore
from ..units import MiB, require_non_negative

STATUS_FORMAT = "wanrl-s3/worker-status"
HISTORY = 64
READ_THREADS = 8  # status objects are small: a fleet's worth is latency-bound GETs
MAX_STATUS_BYTES = 4 * MiB  # 64 installs are ~20 KB; an integration's fields fit easily
FAILURE_INTERVAL_S = 10.0  # a failing worker rewrites its status at most this often
HEARTBEAT_S = 60.0  # an idle worker rewrites its status this often (fleet/broadcast_times.py)
FAILURE_HISTORY = 16  # failure spans kept per worker, newest last
TOLD_KEPT = 256  # recent failure times a reporter remembers, to count each failure once


@dataclass(frozen=True)
class FailureSpan:
    """A stretch of time in which a worker's background work kept failing.

    ``count`` is the failures the worker saw in it (each retry that failed);
    ``message`` the newest one's; ``ended_at_s`` when the worker saw the work
    succeed again (None while it lasts). Times are wall-clock seconds.
    """

    first_at_s: float
    last_at_s: float
    count: int
    message: str
    ended_at_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The span as the status object's JSON stores it."""
        return {
            "first_at_s": self.first_at_s,
            "last_at_s": self.last_at_s,
            "count": self.count,
            "message": self.message,
            "ended_at_s": self.ended_at_s,
        }

    @classmethod
    def from_dict(cls, raw: Any) -> FailureSpan:
        """The span that :meth:`to_dict` wrote; raises ValueError for anything else (a field
        missing or of the wrong type)."""
        if not isinstance(raw, dict):
            raise ValueError(f"a failure span must be an object, got {raw!r}")
        first, last = _number(raw, "first_at_s"), _number(raw, "last_at_s")
        count, message = _number(raw, "count", integer=True), _text(raw, "message")
        if first is None or last is None or count is None or message is None:
            raise ValueError(
                f"a failure span needs first_at_s, last_at_s, count and message, got {sorted(raw)}"
            )
        return cls(first, last, count, message, _number(raw, "ended_at_s"))

    def overlaps(self, from_s: float, to_s: float) -> bool:
        """Whether this span shares any time with ``[from_s, to_s]``."""
        end = self.ended_at_s if self.ended_at_s is not None else self.last_at_s
        return self.first_at_s <= to_s and end >= from_s


@dataclass(frozen=True, kw_only=True)
class WorkerStatus:
    """One worker's status object (``workers/<id>.json``): what it installed and when, its
    recent installs' timings, and its last error."""

    worker_id: str
    region: str = ""
    installed_version: int | None = None
    updated_at_s: float = 0.0
    installs: tuple[dict[str, Any], ...] = ()  # newest last: InstallResult.to_dict()
    downloaded_bytes_total: int = 0
    last_error: str | None = None
    last_error_at_s: float | None = None  # when last_error happened (wall clock)
    failures: tuple[FailureSpan, ...] = ()  # stretches of failures, newest last: kept
    fallback: str | None = None  # why ``region`` is not the worker's own, while it is not
    # Fleet membership (fleet/broadcast_times.py): first start under this id, the spans it was down
    # between restarts, and its measured round trip to the bucket (for the planner).
    started_at_s: float | None = None
    absences: tuple[tuple[float, float], ...] = ()
    round_trip_s: float | None = None
    # Fields an integration adds (e.g. verl's step -> version map); readers ignore them.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def with_install(self, result: InstallResult) -> WorkerStatus:
        """This status after one more install."""
        return replace(
            self,
            installed_version=result.version,
            installs=(*self.installs, result.to_dict())[-HISTORY:],
            downloaded_bytes_total=self.downloaded_bytes_total + result.downloaded_bytes,
            last_error=None,
            last_error_at_s=None,
        )

    def with_error(self, message: str | None, at_s: float | None = None) -> WorkerStatus:
        """This status showing ``message`` (None: no error) as its last error, at ``at_s``."""
        if message is None:
            return replace(self, last_error=None, last_error_at_s=None)
        return replace(self, last_error=message, last_error_at_s=at_s or time.time())

    def to_json(self) -> bytes:
        """The status object's bytes (UTF-8 JSON), ``extra`` fields first so that ours win."""
        return json.dumps(
            {
                **self.extra,
                "format": STATUS_FORMAT,
                "worker_id": self.worker_id,
                "region": self.region,
                "installed_version": self.installed_version,
                "updated_at_s": self.updated_at_s,
                "installs": list(self.installs),
                "downloaded_bytes_total": self.downloaded_bytes_total,
                "last_error": self.last_error,
                "last_error_at_s": self.last_error_at_s,
                "failures": [f.to_dict() for f in self.failures],
                "fallback": self.fallback,
                "started_at_s": self.started_at_s,
                "absences": [list(a) for a in self.absences],
                "round_trip_s": self.round_trip_s,
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> WorkerStatus:
        """Parse a status object; fields this class does not know come back in ``extra``.

        Raises :class:`WorkerStatusError` for bytes that are not a status object,
        including bytes too large or nested too deep to parse (checked first).
        """
        try:
            d = load_bounded_json(data, "worker status object", MAX_STATUS_BYTES)
            if not isinstance(d, dict) or d.get("format") != STATUS_FORMAT:
                got = d.get("format") if isinstance(d, dict) else type(d).__name__
                raise ValueError(f"format is {got!r}, not {STATUS_FORMAT!r}")
            return cls(
                worker_id=_text(d, "worker_id", required=True) or "",
                region=_text(d, "region") or "",
                installed_version=_number(d, "installed_version", integer=True),
                updated_at_s=_number(d, "updated_at_s") or 0.0,
                installs=tuple(_install(i) for i in _list(d, "installs")),
                downloaded_bytes_total=_number(d, "downloaded_bytes_total", integer=True) or 0,
                last_error=_text(d, "last_error"),
                last_error_at_s=_number(d, "last_error_at_s"),
                failures=tuple(FailureSpan.from_dict(f) for f in _list(d, "failures")),
                fallback=_text(d, "fallback"),
                started_at_s=_number(d, "started_at_s"),
                absences=tuple(_span(a) for a in _list(d, "absences")),
                round_trip_s=_number(d, "round_trip_s"),
                extra={k: v for k, v in d.items() if k not in _OWN_KEYS},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WorkerStatusError(f"malformed worker status object: {exc}") from exc

    def installed_at(self, version: int) -> float | None:
        """When this worker first held ``version`` or a newer one, if it did."""
        times = [i["installed_at_s"] for i in self.installs if i["version"] >= version]
        return min(times) if times else None


# The fields readers use (fleet/broadcast_times.py, fleet/links.py), checked as they are read: a
# status object is written by whoever can write the bucket, and one with the wrong types
# must be skipped as malformed, not crash the reader that adds its times.
_INSTALL_TIMES = ("seen_at_s", "installed_at_s", "download_s", "verify_s", "apply_s")


def _number(d: Mapping[str, Any], key: str, *, integer: bool = False) -> Any:
    """``d[key]``: None when absent or null, else a finite number (an int with ``integer``)."""
    value = d.get(key)
    if value is None:
        return None
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        raise ValueError(f"{key} must be {'an integer' if integer else 'a number'}, got {value!r}")
    return value if integer else float(value)


def _text(d: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = d[key] if required else d.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    return value


def _list(d: Mapping[str, Any], key: str) -> list[Any]:
    value = d.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a list, got {value!r}")
    return value


def _install(raw: Any) -> dict[str, Any]:
    """One entry of ``installs`` (InstallResult.to_dict), with the fields readers use."""
    if not isinstance(raw, dict):
        raise ValueError(f"an install must be an object, got {raw!r}")
    if _number(raw, "version", integer=True) is None:
        raise ValueError("an install has no version")
    for key in _INSTALL_TIMES:
        if _number(raw, key) is None:
            raise ValueError(f"an install has no {key}")
    _number(raw, "downloaded_bytes", integer=True)
    return raw


def _span(raw: Any) -> tuple[float, float]:
    """One absence: [from, to] in seconds."""
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError(f"an absence must be [from_s, to_s], got {raw!r}")
    start, end = (_number({"absence": v}, "absence") for v in raw)
    if start is None or end is None:
        raise ValueError(f"an absence must be [from_s, to_s], got {raw!r}")
    return start, end


_OWN_KEYS = frozenset({"format"} | {f.name for f in fields(WorkerStatus)} - {"extra"})


class StatusReporter:
    """Writes one worker's status object; keeps its recent install history.

    An integration that records more per worker (verl's step -> version map) passes
    its fields as ``extra``: they are written with the status and kept in later
    writes, and :func:`read_statuses` hands them back in ``WorkerStatus.extra``.
    Every method writes once, synchronously, except :meth:`failing`, which is
    rate-limited; a failed write raises and the next one carries the whole state
    again.
    """

    def __init__(
        self,
        store: ObjectStore,
        worker_id: str,
        region: str = "",
        *,
        failure_interval_s: float = FAILURE_INTERVAL_S,
        heartbeat_s: float = HEARTBEAT_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.key = layout.worker_status_key(worker_id)  # checks the id
        self.status = WorkerStatus(worker_id=worker_id, region=region)
        self.failure_interval_s = require_non_negative("failure_interval_s", failure_interval_s)
        self._monotonic = monotonic
        self.heartbeat_s = require_non_negative("heartbeat_s", heartbeat_s)
        self._written_s = -math.inf  # when _write last wrote (monotonic)
        self._failure_written_s: float | None = None  # when failing() last wrote
        self._failure_shown: str | None = None  # the message failing() last wrote
        self._failures: tuple[FailureSpan, ...] = ()  # apart from status: any thread adds
        self._told: deque[float] = deque(maxlen=TOLD_KEPT)  # times of failures counted
        self._failures_lock = threading.Lock()

    def installed(self, result: InstallResult, *, extra: Mapping[str, Any] | None = None) -> None:
        """Record an install. It is the background work succeeding, so it also ends an
        open stretch of failures: else the status written now would say "failing"
        until the next write, which an idle worker makes only at its heartbeat."""
        self._failure_shown = None  # the install clears it
        with self._failures_lock:
            self._failures = _ended(self._failures, time.time())
        self._write(self.status.with_install(result), extra)

    def error(self, message: str, at_s: float | None = None) -> None:
        """Show ``message`` as the last error at once (until the next install)."""
        self._write(self.status.with_error(message, at_s))

    def failing(self, message: str | None, at_s: float | None = None) -> bool:
        """Show an ongoing failure (``None``: it is over) in the status; True if written.

        For a worker's background failures, which can repeat every poll: the
        first one is written at once, then the status is rewritten (fresh
        ``updated_at_s``, newest message) at most once per ``failure_interval_s``;
        the end of the failure is written under the same limit. An error set
        by :meth:`error` is not cleared here, only by the next install.

        Every call also keeps the stretch of failures (:class:`FailureSpan`) in
        memory, written or not (see :meth:`failed`); ``None`` ends it.
        """
        if message is None:
            with self._failures_lock:
                self._failures = _ended(self._failures, time.time())
        else:
            self.failed(message, at_s)
        if message is None and (
            self._failure_shown is None or self.status.last_error != self._failure_shown
        ):
            return False
        now_s = self._monotonic()
        if (
            self._failure_written_s is not None
            and now_s - self._failure_written_s < self.failure_interval_s
        ):
            return False
        self._failure_written_s, self._failure_shown = now_s, message
        self._write(self.status.with_error(message, at_s))
        return True

    def failed(self, message: str, at_s: float | None = None) -> None:
        """Count one failure of the background work (at ``at_s``, wall clock) into its
        stretch of failures, in memory: the next write that gets through carries it.

        Any thread may call it. A worker's watcher observer does, for each failure as
        it happens, so that one that comes and goes between two :meth:`failing` calls
        (while the caller is busy installing, say) is counted too; the same failure
        told twice (same time), in whatever order with others, counts once.
        """
        at = time.time() if at_s is None else at_s
        with self._failures_lock:
            if at in self._told:
                return
            self._told.append(at)
            self._failures = _with_failure(self._failures, message, at)

    def restore(self, *, round_trip_s: float | None = None, now_s: float | None = None) -> None:
        """Start (or restart) under this worker id: restore the previous object's history.

        A restart under the same id is the same worker: its installs, first start
        and absences carry over, and the time it was down becomes one more absence
        (it was not part of the fleet for versions published then). Written at once,
        so the fleet sees the worker before its first install.
        """
        now = time.time() if now_s is None else now_s
        try:
            old: WorkerStatus | None = _read_bounded(self.store, self.key)
        except (NotFoundError, VerificationError):  # malformed or too large: start afresh
            old = None
        status = replace(self.status, started_at_s=now, round_trip_s=round_trip_s)
        if old is not None and old.worker_id == status.worker_id:
            gap = ((old.updated_at_s, now),) if old.updated_at_s < now else ()
            status = replace(
                status,
                installed_version=old.installed_version,
                installs=old.installs,
                downloaded_bytes_total=old.downloaded_bytes_total,
                started_at_s=old.started_at_s if old.started_at_s is not None else now,
                absences=(*old.absences, *gap)[-HISTORY:],
                extra=old.extra,
            )
            with self._failures_lock:  # an open stretch ended with the process before
                self._failures = _ended(old.failures, old.updated_at_s)
        self._write(status)

    def resume(self, *, round_trip_s: float | None = None, now_s: float | None = None) -> None:
        """Deprecated spelling of :meth:`restore`."""
        warn_renamed("StatusReporter.resume", "StatusReporter.restore")
        self.restore(round_trip_s=round_trip_s, now_s=now_s)

    def heartbeat(self) -> bool:
        """Rewrite the status if nothing was written for ``heartbeat_s``; True if written.

        An idle worker has nothing to report for hours; without this it would look
        as gone as a dead one (fleet/broadcast_times.py expires workers silent for 300 s).
        """
        if self._monotonic() - self._written_s < self.heartbeat_s:
            return False
        self._write(self.status)
        return True

    def region_changed(self, region: str, fallback: str | None) -> None:
        """Now reading from ``region``; ``fallback`` says why it is not the worker's own."""
        self._write(replace(self.status, region=region, fallback=fallback))

    def annotate(self, extra: Mapping[str, Any]) -> None:
        """Write the status again with the integration's fields ``extra`` (replacing them)."""
        self._write(self.status, extra)

    def _write(self, status: WorkerStatus, extra: Mapping[str, Any] | None = None) -> None:
        if extra is not None:
            status = replace(status, extra=dict(extra))
        with self._failures_lock:
            self.status = replace(status, failures=self._failures, updated_at_s=time.time())
        self._written_s = self._monotonic()
        self.store.put_bytes(self.key, self.status.to_json())


def _with_failure(
    spans: tuple[FailureSpan, ...], message: str, at_s: float
) -> tuple[FailureSpan, ...]:
    """``spans`` counting one more failure: into the open stretch, or a new one."""
    if spans and at_s == spans[-1].last_at_s:
        return spans  # this failure, told again
    last = spans[-1] if spans and spans[-1].ended_at_s is None else None
    if last is None:
        return (*spans, FailureSpan(at_s, at_s, 1, message))[-FAILURE_HISTORY:]
    if at_s < last.last_at_s:  # told late: counted, the newer message stays
        return (*spans[:-1], replace(last, count=last.count + 1))
    return (*spans[:-1], replace(last, last_at_s=at_s, count=last.count + 1, message=message))


def _ended(spans: tuple[FailureSpan, ...], at_s: float) -> tuple[FailureSpan, ...]:
    """``spans`` with an open last stretch ended at ``at_s``."""
    if spans and spans[-1].ended_at_s is None:
        return (*spans[:-1], replace(spans[-1], ended_at_s=max(at_s, spans[-1].last_at_s)))
    return spans


def read_statuses(store: ObjectStore, *, worker_prefix: str = "") -> list[WorkerStatus]:
    """The status objects of the workers whose id starts with ``worker_prefix``, by id.

    Read in parallel (a fleet is hundreds of small GETs). An object that is not a
    status object, or that was deleted between the listing and the read, is
    skipped: one broken worker must not hide the fleet.
    """
    keys = [
        info.key
        for info in store.list(layout.WORKERS_DIR, name_prefix=worker_prefix)
        if info.key.endswith(".json")
    ]
    workers = min(READ_THREADS, max(1, len(keys)))
    with ThreadPoolExecutor(workers, thread_name_prefix="wanrl-status") as pool:
        found = list(pool.map(lambda key: _read_status(store, key), keys))
    return sorted((s for s in found if s is not None), key=lambda s: s.worker_id)


def _read_status(store: ObjectStore, key: str) -> WorkerStatus | None:
    try:
        return _read_bounded(store, key)
    except (VerificationError, NotFoundError):  # malformed, too large, or gone
        return None


def _read_bounded(store: ObjectStore, key: str) -> WorkerStatus:
    """One status object, read only up to its size limit (anyone may write ``workers/``)."""
    return WorkerStatus.from_json(store.get_bytes(key, max_bytes=MAX_STATUS_BYTES))
