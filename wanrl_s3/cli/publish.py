"""``wanrl-s3 publish``: publish a .safetensors file (or a folder of shards) as a version.

With ``--regions FILE`` it publishes in the file's mode: fanout writes every
region (one pass over the tensors, each region committed in order); replicate
and copy write the primary, and bucket replication or ``wanrl-s3 relay`` does
the rest.
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..fetch.chain import lineage, safe_lookup
from ..fetch.files import load_snapshot
from ..fetch.subscriber import Snapshot, Subscriber
from ..format.signing import Signer
from ..io.safetensors_file import iter_source, read_source
from ..publish.publisher import DELTA_MODES, PublishConfig, Publisher
from .common import (
    add_regions_arg,
    add_store_args,
    emit_json,
    human_bytes,
    open_from_args,
    regions_from_args,
)
from .progress import ProgressBar

MiB = 2**20


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "publish", help="publish a version (full or delta)", description=__doc__
    )
    p.add_argument("src", metavar="SRC", help="a .safetensors file or a folder of shards")
    add_store_args(p, required=False)
    add_regions_arg(p, "publish in its mode (fanout: every region; replicate, copy: the primary)")
    p.add_argument("--version", type=int, required=True, help="the new version number")
    p.add_argument(
        "--delta",
        choices=DELTA_MODES,
        default="auto",
        help="auto: a delta against the newest version unless a keyframe is due "
        "or the delta is too big; never: always a full snapshot",
    )
    p.add_argument(
        "--keyframe-every",
        type=int,
        default=10,
        metavar="K",
        help="a full keyframe at least every K versions (default 10)",
    )
    p.add_argument(
        "--base",
        metavar="FILE",
        default=None,
        help="a local copy of the newest version (from `pull`), to encode the "
        "delta against without downloading it",
    )
    p.add_argument("--run-id", default=None, help="the run id recorded in the manifest")
    p.add_argument(
        "--signing-key",
        metavar="PRIVATE.pem",
        default=None,
        help="sign the manifest with this Ed25519 key (see `wanrl-s3 keygen`)",
    )
    p.add_argument("--part-mb", type=int, default=32, help="multipart part size in MiB")
    p.add_argument("--concurrency", type=int, default=16, help="parallel part uploads")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    files = read_source(args.src)  # validates every header before any upload
    config = PublishConfig(
        delta=args.delta,
        keyframe_every=args.keyframe_every,
        part_bytes=args.part_mb * MiB,
        concurrency=args.concurrency,
    )
    regions = regions_from_args(args)
    stores = (
        [open_from_args(args)] if regions is None else [r.store() for r in regions.publish_regions]
    )
    store = stores[0]
    signer = Signer.from_file(args.signing_key) if args.signing_key else None
    publisher = Publisher(stores, config, run_id=args.run_id, signer=signer, keep_base=False)
    if args.delta != "never":
        _adopt_base(publisher, store, args.base, args.keyframe_every)
    tensors = dict(iter_source(files))
    bar = ProgressBar(sum(a.nbytes for a in tensors.values()), f"publish v{args.version}")
    try:
        result = publisher.publish(tensors, args.version, progress=bar.update)
    finally:
        bar.close()
    if args.json:
        emit_json(
            {
                "version": result.version,
                "kind": result.kind,
                "base_version": result.base_version,
                "tensors": result.tensors,
                "raw_bytes": result.raw_bytes,
                "stored_bytes": result.stored_bytes,
                "density": result.density,
                "seconds": round(result.seconds, 3),
                "latest_moved": result.latest_moved,
            }
        )
    else:
        base = "" if result.base_version is None else f" against v{result.base_version}"
        print(
            f"published v{result.version} ({result.kind}{base}) to "
            f"{', '.join(s.url for s in stores)}: "
            f"{result.tensors} tensors, {human_bytes(result.raw_bytes)} raw, "
            f"{human_bytes(result.stored_bytes)} stored, {result.seconds:.2f} s "
            f"({result.throughput_mb_s:,.0f} MB/s of tensors)"
        )
    return 0


def _adopt_base(
    publisher: Publisher, store: object, base_path: str | None, keyframe_every: int
) -> None:
    """Give the one-shot publisher the newest version's bits, verified, to diff against."""
    with Subscriber(store) as sub:  # type: ignore[arg-type]
        latest = sub.latest()
        if latest is None:
            if base_path:
                raise UsageError(f"--base {base_path}: the store has no versions yet")
            return
        if base_path:
            snapshot: Snapshot = load_snapshot(base_path)
            if snapshot.version != latest.version:
                raise UsageError(
                    f"--base {base_path} holds v{snapshot.version} but the newest "
                    f"version is v{latest.version}; pull it first"
                )
            manifest = sub.verify_local(snapshot)
        else:
            snapshot = sub.fetch(latest.version)
            manifest = sub.manifest(snapshot.version)
        since = len(lineage(manifest, safe_lookup(sub.manifest))) - 1
    publisher.adopt_base(
        snapshot.version,
        snapshot.tensors,
        keyframe_version=manifest.keyframe_version or snapshot.version,
        since_keyframe=min(since, keyframe_every),
        borrow=True,
    )
