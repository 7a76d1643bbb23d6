"""``wanrl-s3 pull``: download, verify and write one version as a .safetensors file.

With ``--regions FILE`` it reads from one region (``--region``, or the fastest
measured), and waits, with backoff, while that region shows the version but
not yet all of it (bucket replication has no ordering).

The file holds the published tensors bit for bit, but it is not a byte copy of
the published file: its header is written anew, with ``wanrl_s3.version`` and
``wanrl_s3.run_id`` as its only metadata (docs/format.md, "Files written by pull").
"""

from __future__ import annotations

import argparse
import time

from ..errors import UsageError
from ..fetch.files import local_snapshot, pull_to_file
from ..fetch.subscriber import Snapshot, Subscriber
from ..fetch.watch import wait_visible
from ..io.malloc import return_big_buffers
from ..units import count
from .cdn import add_cdn_args, cdn_reader
from .common import (
    add_read_concurrency_arg,
    add_region_arg,
    add_regions_arg,
    add_store_args,
    emit_json,
    human_bytes,
    non_negative_float,
    store_to_read,
    subscriber_from_args,
    version_arg,
)
from .held import tell
from .progress import ProgressBar


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "pull", help="download and verify a version into a file", description=__doc__
    )
    add_store_args(
        p,
        required=False,
        verify="pull only versions signed by one of these keys: an unsigned or forged "
        "manifest is refused (exit 3) before any payload is read",
    )
    add_regions_arg(p, "pull from one of its regions")
    add_region_arg(p, "not allowed")
    p.add_argument(
        "--visible-timeout-s",
        type=non_negative_float,
        default=300.0,
        metavar="S",
        help="with --regions: how long to wait, in seconds, for a version still replicating",
    )
    p.add_argument(
        "--version",
        type=version_arg,
        default="latest",
        metavar="N|latest",
        help="the version to pull: a number, or 'latest'",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE.safetensors",
        help="the file to write, renamed into place once every tensor verified",
    )
    p.add_argument(
        "--have",
        metavar="FILE",
        default=None,
        help="a file from an earlier pull: download only the deltas after it",
    )
    add_read_concurrency_arg(p)
    p.add_argument(
        "--fsync", action="store_true", help="flush the file to disk before renaming it into place"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_cdn_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return_big_buffers()  # freed download buffers go back (wanrl_s3.io.malloc)
    if args.region and not args.regions:
        raise UsageError("--region picks one region of --regions FILE; give --regions too")
    through_cdn = cdn_reader(args)
    store, _, choice = store_to_read(args)
    store = through_cdn(store)
    if choice is not None:
        tell(f"read from region {choice.region} ({store.url})")
    start = time.monotonic()
    with subscriber_from_args(args, store, concurrency=args.concurrency) as sub:
        have = _have(sub, args.have)
        version = sub.resolve(args.version)
        have_version = None if have is None else have.version
        if choice is not None and not sub.is_visible(version, have_version):
            tell(f"v{version} was not yet whole in region {choice.region} (replicating): waited")
            wait_visible(sub, version, have_version, timeout_s=args.visible_timeout_s)
        plan = sub.plan(version, None if have is None else have.version)
        bar = ProgressBar(plan.download_bytes, f"pull v{version}")
        try:
            snap = pull_to_file(
                sub, args.out, version, have=have, progress=bar.update, durable=args.fsync
            )
        finally:
            bar.close()
    seconds = time.monotonic() - start
    summary = {
        "version": snap.version,
        "out": args.out,
        "tensors": len(snap.tensors),
        "downloaded_bytes": snap.downloaded_bytes,
        "seconds": round(seconds, 3),
        "download_s": round(snap.download_s, 3),
        "verify_s": round(snap.verify_s, 3),
        "mb_per_s": round(snap.downloaded_bytes / max(seconds, 1e-9) / 1e6, 1),
        "path": list(snap.path),
        "verified": True,
    }
    if args.json:
        emit_json(summary)
    else:
        via = " -> ".join(f"v{v}" for v in snap.path) or "local copy"
        print(
            f"pulled v{snap.version} to {args.out}: {count(len(snap.tensors), 'tensor')}, "
            f"{human_bytes(snap.downloaded_bytes)} downloaded via {via} in {seconds:.2f} s "
            f"({summary['mb_per_s']} MB/s), every tensor verified"
        )
    return 0


def _have(sub: Subscriber, path: str | None) -> Snapshot | None:
    """``--have FILE`` as the version it holds; a file of no published version pulls in full."""
    if not path:
        return None
    have = local_snapshot(path, sub)
    if have is None:
        tell(f"{path} holds no published version: pulled in full")
    return have
