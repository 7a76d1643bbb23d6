"""The series ``wanrl-s3 status --plot`` draws, prepared from a fleet report (pure, no I/O).

Three things an operator wants to see at a glance: which version each worker
held over time (a step per install, held until its last status write), when
each version was published and when workers were failing, and T_bcast at the
report's fraction per version, for the whole fleet and for each region. A
region's figure is measured like the fleet's (fleet/broadcast_times.py) on the members of
the version's fleet that read from that region. Times are seconds since the
oldest version in the report was published.
"""

from __future__ import annotations

from dataclasses import dataclass

from .broadcast_times import FleetReport, VersionSpread, t_bcast_at
from .status import WorkerStatus

FLEET = "fleet"  # the label of the whole fleet's T_bcast line


@dataclass(frozen=True)
class Series:
    """One line (or set of markers): its label and its points."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class FleetTimeline:
    """What the plot shows; every x of the version panel is seconds since ``t0_s``."""

    t0_s: float
    fraction: float
    workers: tuple[Series, ...]  # per worker: (time, version installed), a step each
    published: Series  # (time, version) of each commit
    failures: Series  # (time, version held then) of each worker's last error
    bcast: tuple[Series, ...]  # (version, T_bcast s): the fleet's, then each region's


def fleet_timeline(report: FleetReport) -> FleetTimeline:
    """The plot's series for ``report`` (see the module docstring)."""
    spreads = sorted(report.versions, key=lambda v: v.version)
    t0_s = min((v.published_at_s for v in spreads), default=0.0)
    floor = spreads[0].version - 1 if spreads else 0  # where a worker holding nothing sits
    return FleetTimeline(
        t0_s=t0_s,
        fraction=report.fraction,
        workers=tuple(_installs(s, t0_s) for s in report.workers),
        published=Series(
            "published",
            tuple(v.published_at_s - t0_s for v in spreads),
            tuple(float(v.version) for v in spreads),
        ),
        failures=_failures(report.workers, t0_s, floor),
        bcast=_bcast(report, spreads),
    )


def _installs(status: WorkerStatus, t0_s: float) -> Series:
    """A worker's installs as a step line, held until its last status write."""
    done = sorted((i["installed_at_s"], i["version"]) for i in status.installs)
    if done and status.updated_at_s > done[-1][0]:
        done.append((status.updated_at_s, done[-1][1]))
    return Series(
        status.worker_id, tuple(t - t0_s for t, _ in done), tuple(float(v) for _, v in done)
    )


def held_at(status: WorkerStatus, at_s: float) -> int | None:
    """The version ``status``'s worker held at ``at_s``: its newest install by then."""
    done = [i for i in status.installs if i["installed_at_s"] <= at_s]
    return max(done, key=lambda i: i["installed_at_s"])["version"] if done else None


def _failures(statuses: tuple[WorkerStatus, ...], t0_s: float, floor: int) -> Series:
    """Each worker's last error (the status keeps the newest), at the version it held."""
    marks = sorted(
        (s.last_error_at_s, held_at(s, s.last_error_at_s))
        for s in statuses
        if s.last_error is not None and s.last_error_at_s is not None
    )
    return Series(
        "failure (last error)",
        tuple(t - t0_s for t, _ in marks),
        tuple(float(floor if v is None else v) for _, v in marks),
    )


def _bcast(report: FleetReport, spreads: list[VersionSpread]) -> tuple[Series, ...]:
    """T_bcast per version: the report's own for the fleet, then one line per region."""
    lines = [_line(FLEET, [(v.version, v.t_bcast_s) for v in spreads])]
    by_id = {s.worker_id: s for s in report.workers}
    regions = sorted({s.region for s in report.workers if s.region})
    for region in regions:
        points = []
        for v in spreads:
            members = [by_id[m] for m in v.members if m in by_id and by_id[m].region == region]
            reached = [t for t in (s.installed_at(v.version) for s in members) if t is not None]
            points.append(
                (v.version, t_bcast_at(reached, len(members), report.fraction, v.published_at_s))
            )
        lines.append(_line(region, points))
    return tuple(lines)


def _line(label: str, points: list[tuple[int, float | None]]) -> Series:
    measured = [(v, t) for v, t in points if t is not None]
    return Series(label, tuple(float(v) for v, _ in measured), tuple(t for _, t in measured))
