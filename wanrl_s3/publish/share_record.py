"""Share records: what one rank of a sharded publish uploaded, posted for the committing rank.

With R ranks each uploading a share of a version (:mod:`wanrl_s3.publish.shard`),
each rank posts one record under ``v/<version>/shares/<run id>/<rank>.json``
once its payload is complete: its share as a partial manifest (the tensor
entries, the payload objects under its own publish id, the delta base it
encoded against) plus who posted it. The committing rank reads R of them and
merges them into the version's manifest.

A record is read like a manifest, because it becomes one: bounded JSON, every
field checked, the partial manifest through the manifest's own strict reader
(:meth:`Manifest.from_json`), so a record that names an object outside its
rank's publish id, overlapping ranges or an absurd size is a ManifestError
before anything is merged. An empty share (more ranks than tensors, or a rank
that sees no tensor) has no partial manifest.

A rank that fails, or a committer that gives up, posts ``abort.json`` next to
the records (the first one wins): every other rank stops waiting at once and
reports why, instead of waiting out its timeout.

At a launch's first version, the committing rank also posts ``base.json``: the
store's newest version that every rank may adopt as its delta base (one the
readers trust), or none. The other ranks follow it, so that all of them encode
against the same base or none does (:meth:`~wanrl_s3.ShardedPublisher.adopt_newest`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import ManifestError
from ..format import layout
from ..format.manifest import (
    MAX_MANIFEST_BYTES,
    RUN_ID_RE,
    Fields,
    Manifest,
    load_bounded_json,
)

SHARE_FORMAT = "wanrl-s3/share"
ABORT_FORMAT = "wanrl-s3/share-abort"
SCHEMA_VERSION = 1
ASSIGN_MODES = ("balanced", "own")
MAX_RANKS = 1 << 20
ABORT_NAME = "abort.json"
MAX_ABORT_BYTES = 64 * 1024
BASE_FORMAT = "wanrl-s3/share-base"
BASE_NAME = "base.json"
MAX_REASON_CHARS = 4000
_PUBLISH_ID_RE = re.compile(r"^[0-9a-f]{1,64}$")
_RECORD_NAME_RE = re.compile(r"^(\d{6,7})\.json$")
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
_FIELDS = (
    "format",
    "schema_version",
    "run_id",
    "version",
    "rank",
    "ranks",
    "assign",
    "stream_hash",
    "publish_id",
    "share",
)


@dataclass(frozen=True, kw_only=True)
class ShareRecord:
    """One rank's share of a version: its partial manifest (None if empty) and who posted it."""

    run_id: str
    version: int
    rank: int
    ranks: int
    assign: str
    publish_id: str
    share: Manifest | None
    # balanced: BLAKE3 of every (name, shape, bytes) this rank saw, in order. Every rank
    # must have seen the same stream for the balanced assignment to hold; None for "own".
    stream_hash: str | None = None

    @property
    def object_keys(self) -> list[str]:
        """This share's payload keys, relative to the version's directory."""
        return [] if self.share is None else [o.key for o in self.share.objects]

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "format": SHARE_FORMAT,
                "schema_version": SCHEMA_VERSION,
                "run_id": self.run_id,
                "version": self.version,
                "rank": self.rank,
                "ranks": self.ranks,
                "assign": self.assign,
                "stream_hash": self.stream_hash,
                "publish_id": self.publish_id,
                "share": None if self.share is None else self.share.to_dict(),
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, *, version: int, run_id: str, rank: int) -> ShareRecord:
        """Parse and check a record read from ``share_key(version, run_id, rank)``."""
        where = f"share record of rank {rank} for v{version}"
        f = Fields(load_bounded_json(data, where, MAX_MANIFEST_BYTES), where, _FIELDS)
        if f.get("format") != SHARE_FORMAT or f.get("schema_version") != SCHEMA_VERSION:
            raise f.fail("format", f"must be {SHARE_FORMAT!r} schema {SCHEMA_VERSION}")
        record = cls(
            run_id=f.get_str("run_id", RUN_ID_RE),
            version=f.get_int("version", 0, layout.MAX_VERSION),
            rank=f.get_int("rank", 0, MAX_RANKS - 1),
            ranks=f.get_int("ranks", 1, MAX_RANKS),
            assign=f.get_str("assign", choices=ASSIGN_MODES),
            publish_id=f.get_str("publish_id", _PUBLISH_ID_RE, max_len=64),
            stream_hash=None
            if f.raw.get("stream_hash") is None
            else f.get_str("stream_hash", _DIGEST_RE, max_len=64),
            share=_parse_share(f, version),
        )
        for name, found, expected in (
            ("run_id", record.run_id, run_id),
            ("version", record.version, version),
            ("rank", record.rank, rank),
        ):
            if found != expected:
                raise f.fail(name, f"is {found!r}, but the record is stored as {expected!r}")
        _check_share(f, record)
        return record


def _parse_share(f: Fields, version: int) -> Manifest | None:
    raw = f.get("share", optional=True)
    if raw is None:
        return None
    try:
        return Manifest.from_json(json.dumps(raw).encode(), expect_version=version)
    except ManifestError as exc:
        raise f.fail("share", f"is not a valid partial manifest: {exc}") from None


def _check_share(f: Fields, record: ShareRecord) -> None:
    """The share belongs to the record: same run, its own payload directory, unsigned."""
    share = record.share
    if share is None:
        return
    if share.run_id != record.run_id:
        raise f.fail("share", f"names run {share.run_id!r}, not {record.run_id!r}")
    if share.signature is not None:
        raise f.fail("share", "must not be signed (the committing rank signs the version)")
    prefix = f"{record.publish_id}/"
    outside = [key for key in record.object_keys if not key.startswith(prefix)]
    if outside:
        raise f.fail("share", f"object {outside[0]!r} is outside publish id {record.publish_id!r}")


def rank_of(name: str) -> int | None:
    """The rank a record's file name (``000003.json``) stands for, or None."""
    m = _RECORD_NAME_RE.match(name)
    return int(m.group(1)) if m else None


def base_json(version: int | None, manifest_hash: str | None) -> bytes:
    """The committing rank's choice of delta base for a launch's first version (None: none)."""
    return json.dumps(
        {"format": BASE_FORMAT, "base_version": version, "manifest_hash": manifest_hash}
    ).encode()


def parse_base(data: bytes) -> tuple[int, str] | None:
    """(version, manifest digest) from a base record, or None (no base); else ManifestError."""
    raw = load_bounded_json(data, "base record", MAX_ABORT_BYTES)
    f = Fields(raw, "base record", ("format", "base_version", "manifest_hash"))
    if f.get("format") != BASE_FORMAT:
        raise f.fail("format", f"must be {BASE_FORMAT!r}")
    version = f.opt_int("base_version", 0, layout.MAX_VERSION)
    if version is None:
        return None
    return version, f.get_str("manifest_hash", _DIGEST_RE)


def abort_json(rank: int, reason: str) -> bytes:
    """The abort marker: which rank gave up on the version, and why."""
    text = reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."
    return json.dumps({"format": ABORT_FORMAT, "rank": rank, "reason": text}).encode()


def parse_abort(data: bytes) -> str:
    """``rank N: reason`` from an abort marker; a malformed one is a ManifestError."""
    raw = load_bounded_json(data, "abort marker", MAX_ABORT_BYTES)
    f = Fields(raw, "abort marker", ("format", "rank", "reason"))
    if f.get("format") != ABORT_FORMAT:
        raise f.fail("format", f"must be {ABORT_FORMAT!r}")
    rank = f.get_int("rank", 0, MAX_RANKS - 1)
    return f"rank {rank}: {f.get_str('reason', max_len=MAX_REASON_CHARS)}"
