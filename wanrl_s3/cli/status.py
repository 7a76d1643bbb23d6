"""``wanrl-s3 status``: which workers hold which version, and T_bcast as the fleet saw it.

Each version is measured against the workers alive when it was published; a
worker reached it when it installed it or anything newer; the first report
that measures a version's T_bcast records it in the bucket (fleet/broadcast_times.py,
docs/operations.md). Workers silent for ``--expire-after-s`` are listed as
expired, never as lagging; ``--prune`` deletes their status objects.
``--plot FILE.png`` draws the versions each worker held over time (failures
marked) and T_bcast per version, for the fleet and per region.
"""

from __future__ import annotations

import argparse
import time

from ..fleet.broadcast_times import (
    EXPIRE_AFTER_S,
    FleetReport,
    RecordedReport,
    fleet_report,
    prune_expired,
    read_records,
    record_broadcast_times,
)
from ..fleet.status import WorkerStatus, read_statuses
from ..units import count
from .common import (
    add_renamed_option,
    add_store_args,
    emit_json,
    manifests_from_args,
    open_from_args,
    positive_float,
)
from .held import tell

LEGEND = (
    "T_bcast s: from the version's commit until {f:.0%} of its fleet (the workers alive "
    "when it was published) had installed it or a newer one; * = recorded, it will not change.\n"
    "tail s: from then until the last of them had; seen s: median time from the commit "
    "until they saw it in LATEST (the polling delay)."
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "status", help="fleet status and measured T_bcast per version", description=__doc__
    )
    add_store_args(
        p,
        verify="measure only versions whose manifests are signed by one of these keys: an "
        "unsigned or forged one is refused (exit 3)",
    )
    p.add_argument(
        "--fraction",
        type=float,
        default=0.9,
        metavar="F",
        help="T_bcast is when this fraction, in (0, 1], of a version's fleet had installed it "
        "(the tail is reported separately)",
    )
    p.add_argument("--last", type=int, default=10, metavar="N", help="report the newest N versions")
    p.add_argument(
        "--expire-after-s",
        type=positive_float,
        default=EXPIRE_AFTER_S,
        metavar="S",
        help="a worker silent this many seconds is gone (workers write at least every 60 s)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="also draw versions per worker over time (failures marked) and T_bcast at "
        "--fraction per version and region into FILE.png (default: no plot; needs "
        "matplotlib: pip install 'wanrl-s3[plot]')",
    )
    p.add_argument("--prune", action="store_true", help="delete expired workers' status objects")
    p.add_argument(
        "--no-record",
        dest="record",
        action="store_false",
        help="do not record newly measured figures in the bucket (read-only credentials)",
    )
    add_renamed_option(p, "--no-freeze", "--no-record")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _failure_note(s: WorkerStatus, now_s: float) -> str:
    """The worker's stretches of failures, kept after they end: how many, and the newest."""
    if not s.failures:
        return ""
    last = s.failures[-1]
    total = count(sum(f.count for f in s.failures), "failure")
    note = f"  failures: {total} in {count(len(s.failures), 'stretch', 'stretches')}, "
    if last.ended_at_s is None:
        return note + f"failing for {now_s - last.first_at_s:.0f} s"
    took = last.ended_at_s - last.first_at_s
    ago = now_s - last.ended_at_s
    return note + f"the last {took:.1f} s long, ended {ago:.0f} s ago: {last.message}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def measure(args: argparse.Namespace, now_s: float) -> RecordedReport:
    """Read the fleet and the versions, build the report, record what it measured first."""
    store = open_from_args(args)
    statuses = read_statuses(store)
    manifests = manifests_from_args(args, store)
    latest = manifests.latest()
    versions = manifests.versions()[-args.last :]
    published = {v: manifests.get(v).created_at_s for v in versions}
    report = fleet_report(
        statuses,
        published,
        None if latest is None else latest.version,
        args.fraction,
        now_s=now_s,
        expire_after_s=args.expire_after_s,
        records=read_records(store, versions, args.fraction),
    )
    measured = (
        record_broadcast_times(store, report) if args.record else RecordedReport(report, (), None)
    )
    if args.prune:
        prune_expired(store, report)
    return measured


def run(args: argparse.Namespace) -> int:
    now_s = time.time()
    measured = measure(args, now_s)
    if measured.record_error:
        tell(f"wanrl-s3: warning: {measured.record_error}")
    if args.json:  # the report first: a plot that cannot be written must not lose it
        emit_json({**measured.report.to_dict(), "now_s": now_s})
    else:
        print(render(measured.report, now_s, pruned=args.prune))
    if args.plot:
        from .status_plot import plot_status

        written = plot_status(measured.report, args.plot)
        if args.json:  # stdout is the JSON alone
            tell(f"plot written to {written}")
        else:
            print(f"plot written to {written}")
    return 0


def render(report: FleetReport, now_s: float, *, pruned: bool = False) -> str:
    """The versions table, its legend, then one row per worker under a header."""
    alive = len(report.workers) - len(report.expired)
    gone = f", {len(report.expired)} expired{' (pruned)' if pruned else ''}"
    lines = [
        f"{count(alive, 'worker')}{gone if report.expired else ''}; latest v{report.latest}; "
        f"T_bcast at {report.fraction:.0%} of each version's fleet",
        f"{'version':>8} {'installed':>10} {'T_bcast s':>10} {'tail s':>8} {'seen s':>7}",
    ]
    for v in report.versions:
        t_bcast = _fmt(v.t_bcast_s) + ("*" if v.recorded else " ")
        lines.append(
            f"{v.version:>8} {v.installed:>5}/{v.workers:<4} {t_bcast:>11}"
            f"{_fmt(v.tail_s):>8} {_fmt(v.seen_s):>7}"
        )
    lines += [LEGEND.format(f=report.fraction), ""]
    lines.append(f"  {'worker':<24} {'region':<12} {'version':>8} {'status s ago':>13}  state")
    for s in report.workers:
        state = (
            "EXPIRED"
            if s.worker_id in report.expired
            else "LAGGING"
            if s.worker_id in report.lagging
            else "ok"
        )
        state += f"  last error: {s.last_error}" if s.last_error else ""
        state += _failure_note(s, now_s)
        state += f"  fallback: {s.fallback}" if s.fallback else ""
        version = "-" if s.installed_version is None else f"v{s.installed_version}"
        lines.append(
            f"  {s.worker_id:<24} {s.region or '-':<12} {version:>8} "
            f"{now_s - s.updated_at_s:>13.0f}  {state}"
        )
    return "\n".join(lines)
