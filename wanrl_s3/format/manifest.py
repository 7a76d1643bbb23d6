"""Version manifests: the format, and its strict reader.

A manifest says, for one version, every tensor's name, dtype, shape, the BLAKE3
hash of its published bytes, how it is encoded (raw bytes, or an XOR delta
against the version's base) and exactly which byte ranges of which payload
objects hold it. Readers trust nothing in it: :func:`Manifest.from_json`
checks every field before a single payload byte is fetched (unknown dtypes,
shapes that disagree with byte counts, overlapping or out-of-range ranges,
keys that would escape the version's directory, absurd sizes, payload prefixes
out of range), and each
failure is one :class:`~wanrl_s3.errors.ManifestError` that names the field.
The format is specified in docs/format.md; reading a manifest from a store is
:mod:`wanrl_s3.format.manifests`'s alone.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ManifestError, UsageError
from ..store.spec import check_key
from ..units import MiB
from . import dtypes, hashing, layout

FORMAT = "wanrl-s3/manifest"
#: The newest schema this reader reads. A writer writes the oldest that holds its manifest
#: (1 unless a payload object lies under a payload prefix, which needs 2), so readers
#: from before schema 2 keep reading every version published with one prefix.
SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)
KINDS = ("full", "delta")
ENCODINGS = ("raw", "planes", "xor-delta")  # planes: docs/full-format.md

MAX_MANIFEST_BYTES = 64 * MiB
MAX_TENSORS = 1_000_000
MAX_NDIM = 32
MAX_TENSOR_BYTES = 2**44  # 16 TiB: far past any tensor, short of overflow games
MAX_OBJECT_BYTES = 5 * 2**40  # S3's object size limit
MAX_NAME_CHARS = 1024
MAX_DIM = 2**48  # one dimension: far past any tensor, short of overflow games
RUN_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


@dataclass(frozen=True)
class Segment:
    """``length`` bytes at ``offset`` of the payload object ``key`` (relative to the version)."""

    key: str
    offset: int
    length: int


@dataclass(frozen=True)
class ObjectRef:
    """A payload object: its name within the version (``key``), its size, and the payload
    prefix it lies under (None: the version's own directory; see ``layout.payload_dir``)."""

    key: str
    size: int
    prefix: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"key": self.key, "size": self.size}
        if self.prefix is not None:
            d["prefix"] = self.prefix
        return d


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    hash: str  # BLAKE3 of the published tensor's raw little-endian bytes
    encoding: str = "raw"
    segments: tuple[Segment, ...] = ()
    stored_hash: str = ""  # BLAKE3 of the stored bytes; equals ``hash`` for raw
    changed: int | None = None  # xor-delta: how many elements differ from the base

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * dtypes.by_name(self.dtype).itemsize

    @property
    def stored_bytes(self) -> int:
        return sum(s.length for s in self.segments)


@dataclass(frozen=True, kw_only=True)
class Manifest:
    run_id: str
    version: int
    created_at_s: float
    kind: str
    tensors: tuple[TensorEntry, ...]
    objects: tuple[ObjectRef, ...] = ()
    base_version: int | None = None
    keyframe_version: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    signature: Mapping[str, str] | None = None
    # delta only: the digest of the base version's manifest (the integrity chain)
    base_manifest_hash: str | None = None
    # the run the version belongs to: the run_id of the run's first version, kept by every
    # later publisher of the run (absent in manifests written before runs were bound)
    origin_run_id: str | None = None
    # The canonical bytes of the manifest as it was read, what its signature covers.
    read_bytes: bytes | None = field(default=None, compare=False, repr=False)

    # -- derived figures ------------------------------------------------------
    @property
    def raw_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def stored_bytes(self) -> int:
        return sum(o.size for o in self.objects)

    @property
    def numel(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def changed(self) -> int | None:
        """Elements that differ from the base (delta versions), counting raw tensors as all."""
        if self.kind != "delta":
            return None
        return sum(t.numel if t.changed is None else t.changed for t in self.tensors)

    @property
    def density(self) -> float | None:
        changed = self.changed
        return None if changed is None else changed / max(1, self.numel)

    def payload_key(self, relative: str) -> str:
        """The store key of payload object ``relative`` (one of :attr:`objects`)."""
        return layout.payload_key(self.version, relative, self._prefixes.get(relative))

    @functools.cached_property
    def _prefixes(self) -> dict[str, int | None]:
        return {o.key: o.prefix for o in self.objects}

    @property
    def payload_dirs(self) -> tuple[str, ...]:
        """Every directory that holds payload objects of this version, in order."""
        dirs = (layout.payload_dir(self.version, o.prefix) for o in self.objects)
        return tuple(dict.fromkeys(dirs))

    @property
    def schema_version(self) -> int:
        """The oldest schema that holds this manifest (see :data:`SCHEMA_VERSION`)."""
        return 2 if any(o.prefix is not None for o in self.objects) else 1

    @functools.cached_property
    def by_name(self) -> dict[str, TensorEntry]:
        return {t.name: t for t in self.tensors}

    # -- serialisation --------------------------------------------------------
    def to_dict(self, *, with_signature: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": FORMAT,
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "version": self.version,
            "created_at": format_iso(self.created_at_s),
            "kind": self.kind,
            "base_version": self.base_version,
            "keyframe_version": self.keyframe_version,
            "hash_algorithm": hashing.ALGORITHM,
            **({"base_manifest_hash": self.base_manifest_hash} if self.base_manifest_hash else {}),
            **({"origin_run_id": self.origin_run_id} if self.origin_run_id else {}),
            "metadata": dict(self.metadata),
            "objects": [o.to_dict() for o in self.objects],
            "tensors": [_tensor_dict(t) for t in self.tensors],
        }
        if with_signature and self.signature is not None:
            d["signature"] = dict(self.signature)
        return d

    def signing_bytes(self) -> bytes:
        """The canonical bytes a signature covers: the manifest without its signature.

        For a manifest that was read, exactly what was stored (so no float or
        formatting round trip can break a signature); else made from the fields.
        """
        return self.read_bytes or canonical_json(self.to_dict(with_signature=False))

    @functools.cached_property
    def digest(self) -> str:
        """BLAKE3 of :meth:`signing_bytes`: what LATEST and the next delta's manifest pin."""
        return hashing.digest(self.signing_bytes())

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=1).encode()

    def with_signature(self, signature: Mapping[str, str]) -> Manifest:
        return replace(self, signature=dict(signature), read_bytes=self.signing_bytes())

    @classmethod
    def from_json(cls, data: bytes, *, expect_version: int | None = None) -> Manifest:
        """Parse and validate; every problem is a ManifestError naming the field."""
        where = "manifest" if expect_version is None else f"manifest of version {expect_version}"
        raw = load_bounded_json(data, where, MAX_MANIFEST_BYTES)
        manifest = _parse_manifest(Fields(raw, where))
        unsigned = {k: v for k, v in raw.items() if k != "signature"}
        manifest = replace(manifest, read_bytes=canonical_json(unsigned))
        if expect_version is not None and manifest.version != expect_version:
            raise ManifestError(
                f"{where}: field 'version' is {manifest.version}, but the "
                f"manifest is stored under version {expect_version}"
            )
        return manifest

    def validate(self) -> Manifest:
        """Round-trip through the strict reader (used by the publisher before it commits)."""
        return Manifest.from_json(self.to_json(), expect_version=self.version)


def check_tensor(name: object, shape: Sequence[int]) -> None:
    """Refuse, before anything is uploaded, a tensor that no manifest may describe.

    The reader's limits (name length, dimensions) bind the publisher too, so
    such a tensor is bad input, a :class:`UsageError` (exit 2) raised where the
    publisher's input is read, not a ManifestError once its payload went out.
    """
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        shown = repr(name)
        if isinstance(name, str) and len(name) > 48:
            shown = f"{name[:48]!r}... ({len(name)} characters)"
        raise UsageError(
            f"tensor name {shown} is not allowed: a name has 1 to {MAX_NAME_CHARS} characters"
        )
    if len(shape) > MAX_NDIM:
        raise UsageError(
            f"tensor {name!r} has {len(shape)} dimensions; a manifest allows at most {MAX_NDIM}"
        )
    if any(not 0 <= d <= MAX_DIM for d in shape):
        raise UsageError(f"tensor {name!r} has shape {list(shape)}: dimensions are 0 to 2**48")


def canonical_json(d: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace: the bytes a signature or a digest covers."""
    return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()


def _tensor_dict(t: TensorEntry) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": t.name,
        "dtype": t.dtype,
        "shape": list(t.shape),
        "hash": t.hash,
        "encoding": t.encoding,
        "stored_hash": t.stored_hash or t.hash,
        "segments": [{"key": s.key, "offset": s.offset, "length": s.length} for s in t.segments],
    }
    if t.changed is not None:
        d["changed"] = t.changed
    return d


def format_iso(ts_s: float) -> str:
    return dt.datetime.fromtimestamp(ts_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


# -- the strict reader ----------------------------------------------------------
MAX_JSON_DEPTH = 32  # our formats nest five deep; anything far deeper is an attack


def load_bounded_json(data: bytes, what: str, max_bytes: int) -> Any:
    """Parse JSON read from a store, bounded before and during parsing.

    The size is checked first; a nesting too deep for the parser (a hostile
    ``[[[[...``) is a ManifestError, not a RecursionError that kills a thread;
    the result must then nest at most :data:`MAX_JSON_DEPTH` levels.
    """
    if len(data) > max_bytes:
        raise ManifestError(f"{what} is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        raw = json.loads(data)
    except RecursionError:
        raise ManifestError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{what} is not valid JSON: {exc}") from exc
    if _depth_over(raw, MAX_JSON_DEPTH):
        raise ManifestError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    return raw


def _depth_over(value: Any, limit: int) -> bool:
    """True if ``value`` nests more than ``limit`` containers deep (iterative: no recursion)."""
    if not isinstance(value, dict | list):
        return False
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


class Fields:
    """A JSON object with a path, so every error names exactly which field failed."""

    def __init__(self, raw: Any, path: str, allowed: Iterable[str] | None = None) -> None:
        if not isinstance(raw, dict):
            raise ManifestError(f"{path} must be a JSON object, got {type(raw).__name__}")
        self.raw, self.path = raw, path
        if allowed is not None:
            unknown = sorted(set(raw) - set(allowed))
            if unknown:
                raise ManifestError(f"{path}: unknown field {unknown[0]!r}")

    def fail(self, name: str, msg: str) -> ManifestError:
        return ManifestError(f"{self.path}: field {name!r} {msg}")

    def get(self, name: str, *, optional: bool = False) -> Any:
        if name not in self.raw:
            if optional:
                return None
            raise self.fail(name, "is missing")
        return self.raw[name]

    def opt_int(self, name: str, lo: int, hi: int) -> int | None:
        return None if self.raw.get(name) is None else self.get_int(name, lo, hi)

    def get_int(self, name: str, lo: int, hi: int) -> int:
        v = self.get(name)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(name, f"must be an integer, got {v!r}")
        if not lo <= v <= hi:
            raise self.fail(name, f"must be between {lo} and {hi}, got {v}")
        return v

    def get_str(
        self,
        name: str,
        pattern: re.Pattern[str] | None = None,
        choices: Iterable[str] | None = None,
        max_len: int = 4096,
    ) -> str:
        v = self.get(name)
        if not isinstance(v, str) or not v or len(v) > max_len:
            raise self.fail(name, f"must be a non-empty string of at most {max_len} characters")
        if pattern is not None and not pattern.match(v):
            raise self.fail(name, f"has an invalid value {v!r}")
        if choices is not None and v not in choices:
            raise self.fail(name, f"must be one of {', '.join(choices)}, got {v!r}")
        return v

    def get_list(self, name: str, max_len: int) -> list[Any]:
        v = self.get(name)
        if not isinstance(v, list):
            raise self.fail(name, "must be a list")
        if len(v) > max_len:
            raise self.fail(name, f"has {len(v)} entries, over the limit of {max_len}")
        return v


_TOP_FIELDS = (
    "format",
    "base_manifest_hash",
    "schema_version",
    "run_id",
    "origin_run_id",
    "version",
    "created_at",
    "kind",
    "base_version",
    "keyframe_version",
    "hash_algorithm",
    "metadata",
    "objects",
    "tensors",
    "signature",
)
_TENSOR_FIELDS = (
    "name",
    "dtype",
    "shape",
    "hash",
    "encoding",
    "stored_hash",
    "segments",
    "changed",
)


def _parse_manifest(f: Fields) -> Manifest:
    fmt = f.get("format")
    if fmt != FORMAT:
        raise f.fail("format", f"must be {FORMAT!r}, got {fmt!r}")
    schema = f.get_int("schema_version", 1, 10**6)
    if schema not in SCHEMA_VERSIONS:
        raise f.fail(
            "schema_version",
            f"is {schema}; this reader supports {' and '.join(map(str, SCHEMA_VERSIONS))} "
            "(upgrade wanrl-s3 to read newer manifests)",
        )
    f = Fields(f.raw, f.path, _TOP_FIELDS)
    if f.get("hash_algorithm") != hashing.ALGORITHM:
        raise f.fail("hash_algorithm", f"must be {hashing.ALGORITHM!r}")
    version = f.get_int("version", 0, layout.MAX_VERSION)
    kind = f.get_str("kind", choices=KINDS)
    base, keyframe = _parse_lineage(f, version, kind)
    try:
        created = parse_iso(f.get_str("created_at", max_len=40))
    except ValueError:
        raise f.fail(
            "created_at", "must be an ISO-8601 UTC time like 2026-01-31T12:00:00.000000Z"
        ) from None
    objects = _parse_objects(f, schema)
    tensors = tuple(
        _parse_tensor(Fields(t, f"{f.path}: tensors[{i}]", _TENSOR_FIELDS), kind)
        for i, t in enumerate(f.get_list("tensors", MAX_TENSORS))
    )
    if not tensors:
        raise f.fail("tensors", "must not be empty")
    _check_names_unique(f, tensors)
    _check_ranges(f, objects, tensors)
    return Manifest(
        run_id=f.get_str("run_id", RUN_ID_RE),
        version=version,
        created_at_s=created,
        kind=kind,
        tensors=tensors,
        objects=tuple(objects.values()),
        base_version=base,
        keyframe_version=keyframe,
        metadata=_parse_str_map(f, "metadata") or {},
        signature=parse_signature(f),
        base_manifest_hash=_parse_digest(f, "base_manifest_hash", kind == "delta"),
        origin_run_id=parse_origin(f),
    )


def parse_origin(f: Fields) -> str | None:
    """The optional ``origin_run_id`` (a manifest's, or LATEST's): a run id, or absent."""
    return None if f.raw.get("origin_run_id") is None else f.get_str("origin_run_id", RUN_ID_RE)


DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")


def _parse_digest(f: Fields, name: str, allowed: bool) -> str | None:
    """An optional BLAKE3 hex digest field (absent in manifests written before it existed)."""
    if f.raw.get(name) is None:
        return None
    if not allowed:
        raise f.fail(name, "is only allowed in a delta manifest")
    return f.get_str(name, DIGEST_RE, max_len=64)


def _parse_lineage(f: Fields, version: int, kind: str) -> tuple[int | None, int]:
    base = f.opt_int("base_version", 0, layout.MAX_VERSION)
    keyframe = f.get_int("keyframe_version", 0, layout.MAX_VERSION)
    if kind == "full":
        if base is not None:
            raise f.fail("base_version", "must be null for a full version")
        if keyframe != version:
            raise f.fail("keyframe_version", "must equal 'version' for a full version")
    else:
        if base is None or base >= version:
            raise f.fail(
                "base_version", f"must be an earlier version than {version} for a delta version"
            )
        if keyframe > base:
            raise f.fail("keyframe_version", f"must not be after base_version {base}")
    return base, keyframe


def _parse_str_map(f: Fields, name: str) -> dict[str, str] | None:
    """An object of short strings; None when the field is absent or null."""
    v = f.get(name, optional=True)
    if v is None:
        return None
    if (
        not isinstance(v, dict)
        or len(v) > 256
        or not all(
            isinstance(k, str) and isinstance(x, str) and len(k) <= 256 and len(x) <= 65536
            for k, x in v.items()
        )
    ):
        raise f.fail(name, "must be an object of at most 256 short string values")
    return dict(v)


SIGNATURE_FIELDS = ("alg", "key_id", "value")


def parse_signature(f: Fields) -> dict[str, str] | None:
    """The optional ``signature`` object: exactly alg, key_id and value, short strings."""
    sig = _parse_str_map(f, "signature")
    if sig is not None and set(sig) != set(SIGNATURE_FIELDS):
        unknown = sorted(set(sig) - set(SIGNATURE_FIELDS))
        raise f.fail(
            "signature",
            f"has unknown field {unknown[0]!r}"
            if unknown
            else f"must have the fields {', '.join(SIGNATURE_FIELDS)}",
        )
    return sig


def _parse_objects(f: Fields, schema: int) -> dict[str, ObjectRef]:
    """The payload objects; from schema 2 on, each may name its payload prefix."""
    allowed = ("key", "size", "prefix") if schema >= 2 else ("key", "size")
    objects: dict[str, ObjectRef] = {}
    for i, raw in enumerate(f.get_list("objects", MAX_TENSORS)):
        o = Fields(raw, f"{f.path}: objects[{i}]", allowed)
        key = o.get_str("key", max_len=512)
        try:
            check_key(key, field_name="key")
        except UsageError as exc:
            raise o.fail("key", f"escapes the version directory or is malformed: {exc}") from None
        if key in objects or key == layout.MANIFEST_NAME:
            raise o.fail("key", f"{key!r} is listed twice or names the manifest")
        size = o.get_int("size", 0, MAX_OBJECT_BYTES)
        prefix = o.opt_int("prefix", 0, layout.MAX_PAYLOAD_PREFIXES - 1)
        objects[key] = ObjectRef(key, size, prefix)
    return objects


def _parse_tensor(t: Fields, kind: str) -> TensorEntry:
    name = t.get_str("name", max_len=MAX_NAME_CHARS)
    try:
        dtype = dtypes.by_name(t.get_str("dtype", max_len=16))
    except UsageError as exc:
        raise t.fail("dtype", str(exc)) from None
    shape_raw = t.get_list("shape", MAX_NDIM)
    if not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape_raw
    ):
        raise t.fail("shape", f"must be a list of non-negative integers, got {shape_raw!r}")
    shape = tuple(shape_raw)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise t.fail(
            "shape", f"{shape} makes {nbytes} bytes, over the {MAX_TENSOR_BYTES}-byte limit"
        )
    encoding = t.get_str("encoding", choices=ENCODINGS)
    if encoding == "xor-delta" and kind != "delta":
        raise t.fail("encoding", "xor-delta is only allowed in delta versions")
    digest = t.get_str("hash", hashing.HEX_RE)
    stored_hash = t.get_str("stored_hash", hashing.HEX_RE)
    segments = tuple(
        _parse_segment(Fields(s, f"{t.path}.segments[{j}]", ("key", "offset", "length")))
        for j, s in enumerate(t.get_list("segments", 1_000_000))
    )
    stored = sum(s.length for s in segments)
    if encoding == "raw":
        if stored != nbytes:
            raise t.fail(
                "segments",
                f"hold {stored} bytes, but shape {list(shape)} of {dtype.name} needs {nbytes}",
            )
        if stored_hash != digest:
            raise t.fail("stored_hash", "must equal 'hash' for raw encoding")
    changed = t.opt_int("changed", 0, math.prod(shape))
    if encoding == "xor-delta" and changed is None:
        raise t.fail("changed", "is required for xor-delta encoding")
    return TensorEntry(name, dtype.name, shape, digest, encoding, segments, stored_hash, changed)


def _parse_segment(s: Fields) -> Segment:
    key = s.get_str("key", max_len=512)
    offset = s.get_int("offset", 0, MAX_OBJECT_BYTES)
    length = s.get_int("length", 1, MAX_OBJECT_BYTES)
    return Segment(key, offset, length)


def _check_names_unique(f: Fields, tensors: tuple[TensorEntry, ...]) -> None:
    seen: set[str] = set()
    for i, t in enumerate(tensors):
        if t.name in seen:
            raise ManifestError(f"{f.path}: tensors[{i}]: field 'name' {t.name!r} appears twice")
        seen.add(t.name)


def _check_ranges(
    f: Fields, objects: dict[str, ObjectRef], tensors: tuple[TensorEntry, ...]
) -> None:
    """Every segment inside a listed object, and no two segments overlapping."""
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for t in tensors:
        for s in t.segments:
            obj = objects.get(s.key)
            if obj is None:
                raise ManifestError(
                    f"{f.path}: tensor {t.name!r}: segment key {s.key!r} is not listed in 'objects'"
                )
            if s.offset + s.length > obj.size:
                raise ManifestError(
                    f"{f.path}: tensor {t.name!r}: segment {s.offset}+{s.length} is out of "
                    f"range of object {s.key!r} ({obj.size} bytes)"
                )
            spans.setdefault(s.key, []).append((s.offset, s.offset + s.length, t.name))
    for key, items in spans.items():
        items.sort()
        for (_, end, name), (start, _, other) in itertools.pairwise(items):
            if start < end:
                raise ManifestError(
                    f"{f.path}: tensors {name!r} and {other!r} overlap in object {key!r}"
                )
