"""``wanrl-s3 gc``: delete old versions (keeping delta chains whole) and crashed leftovers."""

from __future__ import annotations

import argparse
import dataclasses

from ..fleet.retention import GcReport, RetentionPolicy, collect
from ..units import count
from .common import (
    add_regions_arg,
    add_store_args,
    emit_json,
    human_bytes,
    roles_from_args,
)
from .held import tell


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "gc", help="garbage-collect old versions and leftovers", description=__doc__
    )
    add_store_args(p, required=False, reader=False)
    add_regions_arg(
        p,
        "collect every region the publisher or relay writes (replicate mode: the primary "
        "only, since bucket replication carries the deletions)",
    )
    p.add_argument(
        "--keep",
        type=int,
        default=20,
        metavar="N",
        help="keep the newest N versions, and every version their delta chains need",
    )
    p.add_argument(
        "--grace-s",
        type=float,
        default=3600.0,
        metavar="S",
        help="unreferenced payload and unfinished uploads younger than S seconds are "
        "left alone: they may belong to a publish in progress",
    )
    p.add_argument("--dry-run", action="store_true", help="report what it would do, change nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    policy = RetentionPolicy(args.keep, args.grace_s)
    reports: dict[str, GcReport] = {
        where: collect(store, policy, dry_run=args.dry_run)
        for where, store in roles_from_args(args).collect().items()
    }
    for where, report in reports.items():
        if report.unreadable_versions:
            tell(f"wanrl-s3: warning: {where}: {_unreadable(report.unreadable_versions)}")
    if args.json:
        emit_json({where: dataclasses.asdict(r) for where, r in reports.items()})
        return 0
    for where, report in reports.items():
        print(f"{where}: {describe(report)}")
    return 0


def describe(report: GcReport) -> str:
    """One line: what was kept, and what was (or, dry, would be) deleted and aborted."""
    delete, abort = ("would delete", "would abort") if report.dry_run else ("deleted", "aborted")
    return (
        f"kept {count(len(report.kept_versions), 'version')}; "
        f"{delete} {count(len(report.deleted_versions), 'version')} and "
        f"{count(report.deleted_objects, 'object')} ({human_bytes(report.deleted_bytes)}, "
        f"{report.orphan_objects} orphaned); {abort} "
        f"{count(report.aborted_uploads, 'stale upload')}"
    )


def _unreadable(found: dict[int, str]) -> str:
    first = min(found)
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return (
        f"left the manifest of v{first}{more} alone: it cannot be read ({found[first]}); "
        "delete it by hand if it is junk"
    )
