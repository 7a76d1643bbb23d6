"""``wanrl-s3 publish``: publish a .safetensors file (or a folder of shards) as a version.

With ``--regions FILE`` it publishes in the file's mode: fanout writes every
region (one pass over the tensors, each region committed in order); replicate
and copy write the primary, and bucket replication or ``wanrl-s3 relay`` does
the rest.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import UsageError, VerificationError, VersionConflictError
from ..fetch.files import local_snapshot
from ..fetch.streamed_base import StreamedBase
from ..fetch.subscriber import Snapshot, Subscriber
from ..format.layout import MAX_PAYLOAD_PREFIXES
from ..format.signing import Signer, Verifier
from ..io.malloc import return_big_buffers
from ..io.pages import release
from ..io.safetensors_file import SafetensorsFile, read_source
from ..io.source import StreamedSource
from ..publish.adopt import adopt_newest, adoption_point, check_signing
from ..publish.publisher import DELTA_MODES, FULL_CODINGS, PublishConfig, Publisher, PublishResult
from ..publish.store_check import require_conditional_writes
from ..store import ObjectStore
from ..units import MiB, count
from .common import (
    add_regions_arg,
    add_store_args,
    emit_json,
    human_bytes,
    positive_int,
    roles_from_args,
    verifier_from_args,
    version_number,
)
from .held import tell
from .progress import ProgressBar

ADOPT_ATTEMPTS = 3  # reads of the newest version, while racing publishers move it


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "publish", help="publish a version (full or delta)", description=__doc__
    )
    p.add_argument("src", metavar="SRC", help="a .safetensors file, or a folder of shards")
    add_store_args(
        p,
        required=False,
        verify="the readers' keys; a delta goes out only against a base whose manifests, "
        "back to its keyframe, one of them signed, else the version is a keyframe "
        "(default: with --signing-key, that key alone; without, no base is refused)",
        reader=False,
    )
    add_regions_arg(p, "publish in its mode (fanout: every region; replicate, copy: the primary)")
    p.add_argument(
        "--version",
        type=version_number,
        required=True,
        metavar="N",
        help="the new version number, above the store's newest",
    )
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
        help="how whole tensors are stored: planes: losslessly in byte planes "
        "where that pays, about 0.67x for trained bf16 weights; raw: their bytes as they are",
    )
    p.add_argument(
        "--keyframe-every",
        type=int,
        default=10,
        metavar="K",
        help="a full keyframe at least every K versions",
    )
    p.add_argument(
        "--base",
        metavar="FILE",
        default=None,
        help="a local copy of the newest version (from `pull`), to encode the "
        "delta against without downloading it",
    )
    p.add_argument(
        "--run-id",
        metavar="ID",
        default=None,
        help="the run id recorded in the manifest (default: a new one each call, "
        "run-DATE-TIME-RANDOM)",
    )
    p.add_argument(
        "--signing-key",
        metavar="PRIVATE.pem",
        default=None,
        help="sign the manifest with this Ed25519 key (see `wanrl-s3 keygen`); with "
        "--verify-key (the readers' keyring), the delta base must be signed by one of its "
        "keys, else by this key, or the version goes out as a keyframe",
    )
    p.add_argument(
        "--unsigned",
        action="store_true",
        help="publish without --signing-key onto a run whose versions are signed (refused "
        "otherwise: readers with --verify-key refuse an unsigned version)",
    )
    p.add_argument(
        "--part-mb", type=int, default=32, metavar="MiB", help="multipart upload part size, MiB"
    )
    p.add_argument(
        "--concurrency", type=int, default=16, metavar="N", help="part uploads in flight at once"
    )
    p.add_argument(
        "--payload-prefixes",
        type=positive_int,
        default=1,
        metavar="K",
        help="deal each version's payload objects over K prefixes of the store (v/p0/ ... "
        "v/p<K-1>/), so a fleet's reads are not all asked of one prefix; keep K for the "
        "whole run. `wanrl-s3 estimate` names the K a fleet needs (at most "
        f"{MAX_PAYLOAD_PREFIXES}; 1: every object in the version's own folder)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return_big_buffers()
    files = read_source(args.src)  # validates every header before any upload
    config = PublishConfig(
        delta=args.delta,
        keyframe_every=args.keyframe_every,
        part_bytes=args.part_mb * MiB,
        concurrency=args.concurrency,
        full_coding=args.full_coding,
        payload_prefixes=args.payload_prefixes,
    )
    stores = roles_from_args(args).publish()
    for store in stores:  # before any write: refuse a store that ignores conditional writes
        require_conditional_writes(store)
    signer = Signer.from_file(args.signing_key) if args.signing_key else None
    verifier = verifier_from_args(args)
    check_signing(
        stores[0],
        signer is not None,
        unsigned_ok=args.unsigned,
        fix="pass --signing-key PRIVATE.pem, or --unsigned to publish unsigned anyway",
    )

    def publisher() -> Publisher:
        return Publisher(stores, config, run_id=args.run_id, signer=signer, keep_base=False)

    order = [name for f in files for name in f.specs]  # the order the publisher encodes in
    with Subscriber(stores[0]) as sub:
        pub = publisher()
        base = (
            _adopt_newest(pub, sub, args.base, order, args.version, verifier)
            if args.delta != "never"
            else None
        )
        streamed = base if isinstance(base, StreamedBase) else None
        try:
            result = _publish(pub, files, base, args.version)
        except VerificationError:
            if streamed is None or streamed.failed is None:
                raise
            streamed.close()  # stop fetching ahead: the keyframe needs no base
            tell(f"v{streamed.version} does not verify ({streamed.failed}): published a keyframe")
            result = _publish(publisher(), files, None, args.version)
        finally:
            if streamed is not None:
                streamed.close()
    _print(args, stores, result)
    return 0


def _publish(
    publisher: Publisher,
    files: list[SafetensorsFile],
    base: Mapping[str, np.ndarray] | None,
    version: int,
) -> PublishResult:
    """Publish the files' tensors, one resident at a time, with the base's alongside:
    a streamed base is loaded just before its tensor is encoded, and every base
    tensor (a file's, or a streamed one) is let go of right after."""

    def before(name: str) -> None:
        if isinstance(base, StreamedBase):
            base.load(name)

    def after(name: str) -> None:
        if isinstance(base, StreamedBase):
            base.drop(name)
        elif base is not None and name in base:
            release(base[name])

    source = StreamedSource(files, before=before, after=after)
    bar = ProgressBar(sum(a.nbytes for a in source.values()), f"publish v{version}")
    try:
        return publisher.publish(source, version, progress=bar.update)
    finally:
        bar.close()


def _print(args: argparse.Namespace, stores: Sequence[ObjectStore], result: PublishResult) -> None:
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
            f"{count(result.tensors, 'tensor')}, {human_bytes(result.raw_bytes)} raw, "
            f"{human_bytes(result.stored_bytes)} stored, {result.seconds:.2f} s "
            f"({result.throughput_mb_s:,.0f} MB/s of tensors)"
        )


def _adopt_newest(
    publisher: Publisher,
    sub: Subscriber,
    base_path: str | None,
    order: list[str],
    version: int,
    verifier: Verifier | None,
) -> Mapping[str, np.ndarray] | None:
    """Continue from the store's newest version (verified), so a delta can go out.

    The base is ``--base FILE`` (checked against the manifest, then mapped), or
    else the newest version itself, streamed in while the delta is encoded, a few
    tensors ahead in the source's ``order`` (:class:`StreamedBase`). Returns what
    was adopted, if anything. A publisher racing this one for another version
    number may commit between the read of the newest version and its adoption:
    the newer one is streamed instead, as if it had been there first.
    """
    if base_path:
        local = local_snapshot(base_path, sub)
        if local is not None:
            return _adopt(publisher, sub, local, version, f"--base {base_path}", verifier)
        tell(f"--base {base_path} holds no published version: used the newest one instead")
    for _ in range(ADOPT_ATTEMPTS):
        point = adoption_point(sub)
        base = None if point is None else _streamed(sub, point.version, order)
        try:
            return _adopt(publisher, sub, base, version, None, verifier)
        except UsageError:
            newest = adoption_point(sub)
            if base is None or newest is None or newest.version == base.version:
                raise
            # another publisher committed a version since the point was read (its race was
            # for another version number): stream that one in instead
    raise VersionConflictError(
        f"the newest version at {publisher.store.url} moved {ADOPT_ATTEMPTS} times while "
        f"v{version} was being prepared: too many concurrent publishers"
    )


def _streamed(sub: Subscriber, version: int, order: list[str]) -> Snapshot:
    return Snapshot(version, StreamedBase(sub, version, order=order))


def _adopt(
    publisher: Publisher,
    sub: Subscriber,
    base: Snapshot | None,
    version: int,
    named: str | None,
    verifier: Verifier | None,
) -> Mapping[str, np.ndarray] | None:
    """adopt_newest() from ``base`` (``named`` is the flag that gave it, for a local file); what
    was adopted, if anything. A streamed base is closed when it is refused."""
    try:
        try:
            point = adopt_newest(publisher, base=base, publishing=version, verifier=verifier)
        except UsageError as exc:
            raise UsageError(f"{named}: {exc}" if named else str(exc)) from exc
        except VerificationError as exc:  # only a local file can fail here (see adopt_newest)
            if named is None:
                raise
            raise type(exc)(f"{named} is not the version it claims: {exc}") from exc
    except BaseException:
        if base is not None and isinstance(base.tensors, StreamedBase):
            base.tensors.close()  # nothing fetched ahead outlives the refusal
        raise
    if base is None or point is None:
        return None
    if not point.adopted:  # a base the readers would not trust: the version is a keyframe
        if isinstance(base.tensors, StreamedBase):
            base.tensors.close()
        return None
    return base.tensors
