"""``wanrl-s3 gc``: delete old versions (keeping delta chains whole) and crashed leftovers."""

from __future__ import annotations

import argparse
import dataclasses

from ..fleet.retention import GcReport, RetentionPolicy, collect
from .common import (
    add_regions_arg,
    add_store_args,
    emit_json,
    human_bytes,
    roles_from_args,
)


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
        help="keep the newest N versions (and every version their chains need)",
    )
    p.add_argument(
        "--grace-s",
        type=float,
        default=3600.0,
        help="unreferenced payload and unfinished uploads younger than this are "
        "left alone: they may belong to a publish in progress",
    )
    p.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    policy = RetentionPolicy(args.keep, args.grace_s)
    reports: dict[str, GcReport] = {
        where: collect(store, policy, dry_run=args.dry_run)
        for where, store in roles_from_args(args).collect().items()
    }
    if args.json:
        emit_json({where: dataclasses.asdict(r) for where, r in reports.items()})
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    for where, report in reports.items():
        print(
            f"{where}: kept {len(report.kept_versions)} versions; {verb} "
            f"{len(report.deleted_versions)} versions and {report.deleted_objects} objects "
            f"({human_bytes(report.deleted_bytes)}, {report.orphan_objects} orphaned), "
            f"aborted {report.aborted_uploads} stale uploads"
        )
    return 0
