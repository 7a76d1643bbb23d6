"""``wanrl-s3 status``: which workers hold which version, and T_bcast as the fleet saw it."""

from __future__ import annotations

import argparse

from ..fleet.status import fleet_report, read_statuses
from .common import add_store_args, emit_json, open_from_args, subscriber_from_args


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "status", help="fleet status and measured T_bcast per version", description=__doc__
    )
    add_store_args(p)
    p.add_argument(
        "--fraction",
        type=float,
        default=0.9,
        help="T_bcast is when this fraction of workers had installed a version "
        "(default 0.9; the tail is reported separately)",
    )
    p.add_argument("--last", type=int, default=10, help="report the newest N versions")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def run(args: argparse.Namespace) -> int:
    store = open_from_args(args)
    statuses = read_statuses(store)
    with subscriber_from_args(args, store) as sub:
        latest = sub.latest()
        versions = sub.versions()[-args.last :]
        published = {v: sub.manifest(v).created_at_s for v in versions}
    report = fleet_report(
        statuses, published, None if latest is None else latest.version, args.fraction
    )
    if args.json:
        emit_json(report.to_dict())
        return 0
    print(
        f"{len(statuses)} workers; latest v{report.latest}; T_bcast at "
        f"{args.fraction:.0%} of workers"
    )
    print(f"{'version':>8} {'installed':>10} {'T_bcast s':>10} {'tail s':>8} {'seen s':>7}")
    for v in report.versions:
        print(
            f"{v.version:>8} {v.installed:>5}/{v.workers:<4} {_fmt(v.t_bcast_s):>10} "
            f"{_fmt(v.tail_s):>8} {_fmt(v.seen_s):>7}"
        )
    for s in statuses:
        flag = "  LAGGING" if s.worker_id in report.lagging else ""
        err = f"  last error: {s.last_error}" if s.last_error else ""
        err += f"  fallback: {s.fallback}" if s.fallback else ""
        print(f"  {s.worker_id:<24} {s.region or '-':<12} v{s.installed_version}{flag}{err}")
    return 0
