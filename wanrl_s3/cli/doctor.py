"""``wanrl-s3 doctor``: does this store keep what the protocol relies on? One table.

It writes a few small objects under ``checks/scratch/<id>/`` of the store's
prefix, probes with them every property publishing and fetching rely on
(conditional create on PUT and on multipart completion, compare-and-swap,
refusal of an upload whose checksum is wrong, read-after-write,
list-after-write, range reads, the ETag's form, delete), removes them, and
prints one row per property: the result, and what wanrl-s3 does about it. It
also records the conditional-write check for ``publish`` (``checks/``, see
docs/format.md). Exit codes: 0 every guarantee held; 8 one did not; 6 the
store cannot be used at all (unreachable, not an object store, no such bucket,
no write access); 2 bad flags or credentials.
"""

from __future__ import annotations

import argparse
import dataclasses
import uuid

from ..errors import NotFoundError, StoreError, StoreGuaranteeError
from ..format import layout
from ..publish.store_check import record
from ..store import ObjectStore
from ..store.doctor import Finding, diagnose
from .common import add_store_args, emit_json, open_from_args

_HEADER = ("property", "result", "what wanrl-s3 does about it")


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "doctor", help="check that a store keeps the guarantees publishing relies on",
        description=__doc__,
    )  # fmt: skip
    add_store_args(p, verify=None, reader=False)
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = open_from_args(args)
    where = f"{store.url} at {args.endpoint_url}" if args.endpoint_url else store.url
    scratch = layout.scratch_dir(uuid.uuid4().hex)
    _can_use(store, scratch, where)
    findings = diagnose(store, scratch)
    record(store, findings)  # publish's check, refreshed either way
    if args.json:
        emit_json({"store": store.url, "findings": [dataclasses.asdict(f) for f in findings]})
    else:
        print(f"wanrl-s3 doctor: {where}")
        print(table(findings))
    broken = [f.name for f in findings if f.broken]
    if broken:
        raise StoreGuaranteeError(
            f"{where} does not keep {len(broken)} of the guarantees publishing relies on "
            f"({', '.join(broken)}): `wanrl-s3 publish` refuses it"
        )
    return 0


def table(findings: list[Finding]) -> str:
    """Three aligned columns; the result says what the store did."""
    rows = [_HEADER] + [(f.name, f"{f.status}: {f.seen}", f.action) for f in findings]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(
        f"{name:<{widths[0]}}  {result:<{widths[1]}}  {action}" for name, result, action in rows
    )


def _can_use(store: ObjectStore, scratch: str, where: str) -> None:
    """One line, before any probe, when the store cannot be read or written at all."""
    steps = (
        ("read", "a LIST", lambda: store.list(f"{layout.CHECKS_DIR}/")),
        ("write to", "a PUT", lambda: store.put_bytes(f"{scratch}/write-access", b"")),
    )
    for verb, request, step in steps:
        try:
            step()
        except NotFoundError as exc:  # an S3 service names a missing bucket: NoSuchBucket
            raise StoreError(
                f"{where} answered {request} with 404 and no bucket error: it is not an "
                "object store, or not this bucket's"
            ) from exc
        except StoreError as exc:
            hint = " (no write access, or not an object store)" if verb == "write to" else ""
            raise StoreError(f"cannot {verb} {where}{hint}: {exc}") from exc
