"""``wanrl-s3 publish``: publish a .safetensors file (or a folder of shards) as a version.

With ``--regions FILE`` it publishes in the file's mode: fanout writes every
region (one pass over the tensors, each region committed in order); replicate
and copy write the primary, and bucket replication or ``wanrl-s3 relay`` does
the rest.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import UsageError, VerificationError
from ..fetch.files import local_snapshot
from ..fetch.subscriber import Subscriber
from ..format.signing import Signer
from ..io.safetensors_file import iter_source, read_source
from ..publish.publisher import DELTA_MODES, FULL_CODINGS, PublishConfig, Publisher
from ..publish.resume import resume
from ..units import MiB
from .common import (
    add_regions_arg,
    add_store_args,
    emit_json,
    human_bytes,
    roles_from_args,
)
from .progress import ProgressBar


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
        "or the delta is too big; always: a delta whenever the store has a version to "
        "diff against (tensors whose delta would not pay still go whole); never: always "
        "a full snapshot",
    )
    p.add_argument(
        "--full-coding",
        choices=FULL_CODINGS,
        default="planes",
        help="how whole tensors are stored: planes (default): losslessly in byte planes "
        "where that pays, about 0.67x for trained bf16 weights; raw: their bytes as they are",
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
        full_coding=args.full_coding,
    )
    stores = roles_from_args(args).publish()
    signer = Signer.from_file(args.signing_key) if args.signing_key else None
    publisher = Publisher(stores, config, run_id=args.run_id, signer=signer, keep_base=False)
    if args.delta != "never":
        _resume(publisher, args.base)
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
        against = "" if result.base_version is None else f" against v{result.base_version}"
        print(
            f"published v{result.version} ({result.kind}{against}) to "
            f"{', '.join(s.url for s in stores)}: "
            f"{result.tensors} tensors, {human_bytes(result.raw_bytes)} raw, "
            f"{human_bytes(result.stored_bytes)} stored, {result.seconds:.2f} s "
            f"({result.throughput_mb_s:,.0f} MB/s of tensors)"
        )
    return 0


def _resume(publisher: Publisher, base_path: str | None) -> None:
    """Continue from the store's newest version (verified), so a delta can go out."""
    base = None
    if base_path:
        with Subscriber(publisher.store) as sub:
            base = local_snapshot(base_path, sub)
        if base is None:
            print(
                f"--base {base_path} holds no published version: downloading the newest one",
                file=sys.stderr,
            )
    try:
        resume(publisher, base=base)
    except UsageError as exc:
        raise UsageError(f"--base {base_path}: {exc}" if base_path else str(exc)) from exc
    except VerificationError as exc:  # only a --base file can fail here (see resume)
        raise type(exc)(f"--base {base_path} is not the version it claims: {exc}") from exc
