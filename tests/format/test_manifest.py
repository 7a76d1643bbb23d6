"""The manifest reader refuses every malformed manifest with an error naming the field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from wanrl_s3.errors import ManifestError, VerificationError
from wanrl_s3.format import hashing
from wanrl_s3.format.latest import Latest
from wanrl_s3.format.manifest import Manifest, ObjectRef, Segment, TensorEntry

H = hashing.digest(b"x" * 16)


def valid() -> dict[str, Any]:
    entries = (
        TensorEntry("w", "BF16", (2, 4), H, "raw", (Segment("p/000000.bin", 0, 16),), H),
        TensorEntry("b", "F32", (2,), H, "raw", (Segment("p/000000.bin", 16, 8),), H),
    )
    m = Manifest(
        run_id="run-1",
        version=7,
        created_at_s=1_700_000_000.5,
        kind="full",
        tensors=entries,
        objects=(ObjectRef("p/000000.bin", 24),),
        base_version=None,
        keyframe_version=7,
        metadata={"step": "70"},
    )
    return m.to_dict()


def parse(d: dict[str, Any]) -> Manifest:
    return Manifest.from_json(json.dumps(d).encode(), expect_version=d.get("version"))


def test_valid_manifest_round_trips() -> None:
    m = parse(valid())
    assert m.version == 7 and m.kind == "full" and m.raw_bytes == 24 and m.stored_bytes == 24
    assert Manifest.from_json(m.to_json()) == m
    assert isinstance(ManifestError("x"), VerificationError)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target: Any = d
        parts = path.split(".")
        for p in parts[:-1]:
            target = target[int(p)] if p.isdigit() else target[p]
        last = parts[-1]
        if value is _DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


_DELETE = object()

BAD: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "unknown dtype": (_set("tensors.0.dtype", "F8_E4M3"), "dtype"),
    "shape disagrees with bytes": (_set("tensors.0.shape", [2, 5]), "segments"),
    "negative dim": (_set("tensors.0.shape", [-2, 4]), "shape"),
    "absurd size": (_set("tensors.0.shape", [2**40, 2**20]), "shape"),
    "overlapping ranges": (_set("tensors.1.segments.0.offset", 8), "overlap"),
    "range past object end": (_set("objects.0.size", 20), "out of range"),
    "key escapes prefix": (_set("objects.0.key", "../../other/v/1/x.bin"), "key"),
    "absolute key": (_set("objects.0.key", "/etc/passwd"), "key"),
    "segment in unlisted object": (_set("tensors.0.segments.0.key", "p/000009.bin"), "not listed"),
    "missing field": (_set("tensors.0.hash", _DELETE), "hash"),
    "bad hash": (_set("tensors.0.hash", "abc"), "hash"),
    "unknown field": (_set("surprise", 1), "surprise"),
    "wrong format": (_set("format", "something-else"), "format"),
    "newer schema": (_set("schema_version", 3), "schema_version"),
    "payload prefix in schema 1": (_set("objects.0.prefix", 0), "prefix"),
    "version is a string": (_set("version", "7"), "version"),
    "bool as int": (_set("tensors.0.segments.0.offset", True), "offset"),
    "zero-length segment": (_set("tensors.0.segments.0.length", 0), "length"),
    "duplicate name": (_set("tensors.1.name", "w"), "twice"),
    "empty tensors": (_set("tensors", []), "tensors"),
    "full with a base": (_set("base_version", 3), "base_version"),
    "bad kind": (_set("kind", "partial"), "kind"),
    "bad created_at": (_set("created_at", "yesterday"), "created_at"),
    "delta encoding in a full version": (_set("tensors.0.encoding", "xor-delta"), "encoding"),
    "raw stored hash differs": (_set("tensors.0.stored_hash", "0" * 64), "stored_hash"),
}


def spread() -> dict[str, Any]:
    """The valid manifest with its object under payload prefix 3 (schema 2)."""
    d = valid()
    d.update(schema_version=2)
    d["objects"][0]["prefix"] = 3
    return d


BAD_SPREAD: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "prefix past the last": (_set("objects.0.prefix", 256), "prefix"),
    "negative prefix": (_set("objects.0.prefix", -1), "prefix"),
    "prefix a string": (_set("objects.0.prefix", "3"), "prefix"),
    "prefix a bool": (_set("objects.0.prefix", True), "prefix"),
    "unknown object field": (_set("objects.0.shard", 1), "shard"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPREAD))
def test_malformed_payload_prefix_is_refused_naming_the_field(case: str) -> None:
    mutate, needle = BAD_SPREAD[case]
    d = spread()
    mutate(d)
    with pytest.raises(ManifestError, match=needle):
        parse(d)


def test_payload_keys_follow_each_objects_prefix() -> None:
    """A schema 2 manifest names each object's prefix; schema 1 keeps the version's directory,
    and a writer writes schema 1 unless an object needs 2 (older readers keep reading it)."""
    old = parse(valid())
    assert old.payload_key("p/000000.bin") == "v/000000000007/p/000000.bin"
    assert old.payload_dirs == ("v/000000000007",)
    assert old.to_dict()["schema_version"] == 1 and "prefix" not in old.to_dict()["objects"][0]
    new = parse(spread())
    assert new.objects == (ObjectRef("p/000000.bin", 24, 3),)
    assert new.payload_key("p/000000.bin") == "v/p3/000000000007/p/000000.bin"
    assert new.payload_dirs == ("v/p3/000000000007",)
    assert new.to_dict() == spread()
    assert Manifest.from_json(new.to_json()) == new
    as_two = valid()
    as_two["schema_version"] = 2  # schema 2 without a prefix: the version's own directory
    assert parse(as_two).payload_key("p/000000.bin") == "v/000000000007/p/000000.bin"


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_manifest_is_refused_naming_the_field(case: str) -> None:
    mutate, needle = BAD[case]
    d = copy.deepcopy(valid())
    mutate(d)
    with pytest.raises(ManifestError) as info:
        parse(d)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_version_must_match_where_it_is_stored() -> None:
    with pytest.raises(ManifestError, match="stored under version 8"):
        Manifest.from_json(json.dumps(valid()).encode(), expect_version=8)


@pytest.mark.parametrize("blob", [b"", b"{", b"[]", b"\xff\xfe", b"null", b'"x"'])
def test_garbage_is_refused(blob: bytes) -> None:
    with pytest.raises(ManifestError):
        Manifest.from_json(blob)


def test_delta_manifest_lineage_rules() -> None:
    d = valid()
    d.update(kind="delta", base_version=6, keyframe_version=5)
    d["tensors"][0].update(encoding="xor-delta", changed=3, stored_hash=H)
    assert parse(d).base_version == 6
    for field, value, needle in [
        ("base_version", 7, "earlier"),
        ("base_version", None, "base_version"),
        ("keyframe_version", 6.5, "keyframe_version"),
    ]:
        bad = copy.deepcopy(d)
        bad[field] = value
        with pytest.raises(ManifestError, match=needle):
            parse(bad)
    bad = copy.deepcopy(d)
    del bad["tensors"][0]["changed"]
    with pytest.raises(ManifestError, match="changed"):
        parse(bad)


def test_latest_pointer_round_trip_and_validation() -> None:
    latest = Latest(
        version=12, run_id="run-1", kind="delta", keyframe_version=10, published_at_s=1.7e9
    )
    assert Latest.from_json(latest.to_json()) == latest
    d = json.loads(latest.to_json())
    d["manifest"] = "v/000000000011/manifest.json"
    with pytest.raises(ManifestError, match="manifest"):
        Latest.from_json(json.dumps(d).encode())
