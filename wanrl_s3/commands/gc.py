"""``wanrl-s3 gc``: delete old versions (keeping delta chains whole) and crashed leftovers."""

from __future__ import annotations

import argparse
import dataclasses

from ..retention import RetentionPolicy, collect
from .common import add_store_args, emit_json, human_bytes, open_from_args


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "gc", help="garbage-collect old versions and leftovers", description=__doc__
    )
    add_store_args(p)
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
    report = collect(
        open_from_args(args), RetentionPolicy(args.keep, args.grace_s), dry_run=args.dry_run
    )
    if args.json:
        emit_json(dataclasses.asdict(report))
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    print(
        f"kept {len(report.kept_versions)} versions; {verb} {len(report.deleted_versions)} "
        f"versions and {report.deleted_objects} objects ({human_bytes(report.deleted_bytes)}, "
        f"{report.orphan_objects} orphaned), aborted {report.aborted_uploads} stale uploads"
    )
    return 0
