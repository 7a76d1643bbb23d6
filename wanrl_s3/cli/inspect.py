"""``wanrl-s3 inspect``: the versions in a store, or the tensors of one version.

Each version shows the run it belongs to and the key that signed it (the key id
that ``keygen`` prints and that refusals name), and LATEST its own signer and
expiry: who signed what is visible before any reader refuses it.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import NotFoundError, VerificationError
from ..format.latest import Latest
from ..format.manifest import Manifest, format_iso
from ..format.manifests import Manifests
from ..units import count
from .common import add_store_args, emit_json, human_bytes, manifests_from_args, version_arg

UNREADABLE = "unreadable"  # the kind of a listed version whose manifest cannot be read


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "inspect", help="list versions (kind, sizes, density)", description=__doc__
    )
    add_store_args(
        p,
        verify="list only versions whose manifests are signed by one of these keys: an "
        "unsigned or forged one is refused (exit 3)",
    )
    p.add_argument(
        "--version",
        type=version_arg,
        default=None,
        metavar="N|latest",
        help="show this version's tensors (default: list every version)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def version_row(m: Manifest, latest: int | None) -> dict[str, Any]:
    return {
        "version": m.version,
        "latest": m.version == latest,
        "kind": m.kind,
        "base_version": m.base_version,
        "keyframe_version": m.keyframe_version,
        "tensors": len(m.tensors),
        "raw_bytes": m.raw_bytes,
        "stored_bytes": m.stored_bytes,
        "density": m.density,
        "created_at": m.to_dict()["created_at"],
        "run_id": m.run_id,
        "run": m.origin_run_id or m.run_id,
        "signed_by": signer_of(m.signature),
    }


def signer_of(signature: object) -> str | None:
    """The key id a signature names (None: unsigned)."""
    return signature.get("key_id") if isinstance(signature, dict) else None


def latest_row(pointer: Latest | None) -> dict[str, Any] | None:
    if pointer is None:
        return None
    expires = pointer.expires_at_s
    return {
        "version": pointer.version,
        "run": pointer.origin_run_id or pointer.run_id,
        "signed_by": signer_of(pointer.signature),
        "expires_at": None if expires is None else format_iso(expires),
    }


def _row(manifests: Manifests, version: int, latest: int | None) -> dict[str, Any] | None:
    """A version's row (None if deleted since the listing); one whose manifest cannot be
    read or verified is listed as such, with the reason: one junk manifest must not hide
    the others."""
    try:
        return version_row(manifests.get(version), latest)
    except NotFoundError:
        return None
    except VerificationError as exc:
        return {"version": version, "latest": version == latest, "kind": UNREADABLE,
                "error": str(exc)}  # fmt: skip


def run(args: argparse.Namespace) -> int:
    manifests = manifests_from_args(args)
    latest = manifests.latest()
    latest_v = None if latest is None else latest.version
    if args.version is not None:
        return _show_version(manifests.get(manifests.resolve(args.version)), args.json)
    rows = [r for v in manifests.versions() if (r := _row(manifests, v, latest_v)) is not None]
    if args.json:
        emit_json(
            {
                "store": args.store,
                "latest": latest_v,
                "latest_pointer": latest_row(latest),
                "versions": rows,
            }
        )
        return 0
    if not rows:
        print(f"no versions at {args.store}")
        return 0
    print(
        f"{'version':>9} {'kind':<5} {'base':>6} {'tensors':>7} {'raw':>11} {'stored':>11} "
        f"{'density':>8} {'signed by':<16}  {'run':<20} created"
    )
    for r in rows:
        if r["kind"] == UNREADABLE:
            print(f"{r['version']:>8}{'*' if r['latest'] else ' '} {UNREADABLE}: {r['error']}")
            continue
        density = "" if r["density"] is None else f"{r['density']:.3%}"
        base = "" if r["base_version"] is None else str(r["base_version"])
        mark = "*" if r["latest"] else " "
        print(
            f"{r['version']:>8}{mark} {r['kind']:<5} {base:>6} {r['tensors']:>7} "
            f"{human_bytes(r['raw_bytes']):>11} {human_bytes(r['stored_bytes']):>11} "
            f"{density:>8} {r['signed_by'] or 'unsigned':<16}  {r['run']:<20} {r['created_at']}"
        )
    print("* = LATEST" + _latest_line(latest_row(latest)))
    return 0


def _latest_line(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    if row["signed_by"] is None:
        return " (unsigned)"
    return f" (signed by {row['signed_by']}, expires {row['expires_at']})"


def _show_version(m: Manifest, as_json: bool) -> int:
    if as_json:
        emit_json(m.to_dict())
        return 0
    signer = signer_of(m.signature)
    print(
        f"version {m.version} ({m.kind}, base {m.base_version}, keyframe "
        f"{m.keyframe_version}), run {m.origin_run_id or m.run_id} (published as "
        f"{m.run_id}), {'signed by key ' + signer if signer else 'unsigned'}, "
        f"{count(len(m.tensors), 'tensor')}, "
        f"{human_bytes(m.raw_bytes)} raw, {human_bytes(m.stored_bytes)} stored"
    )
    for t in m.tensors:
        changed = "" if t.changed is None else f" changed={t.changed}"
        print(
            f"  {t.name}  {t.dtype}{list(t.shape)}  {t.encoding} "
            f"{human_bytes(t.stored_bytes)}{changed}"
        )
    return 0
