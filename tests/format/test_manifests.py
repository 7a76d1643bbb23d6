"""The manifest owner: bounded, pinned, cached reads; LATEST never followed backwards; the
claim rule; and no manifest read or parsed anywhere else in the product.

Memory stores: what is tested is the reader's policy, which is the same over every
backend (tests/store's contract suite covers the stores themselves).
"""

from __future__ import annotations

import ast
import json
import time
import uuid
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import (
    ManifestError,
    NotFoundError,
    UsageError,
    VerificationError,
    VersionConflictError,
)
from wanrl_s3.format import layout
from wanrl_s3.format.latest import Latest
from wanrl_s3.format.manifest import MAX_MANIFEST_BYTES, Manifest
from wanrl_s3.format.manifests import Manifests, check_claimable, require_newer
from wanrl_s3.publish.adopt import adopt_newest
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import Blob, ObjectStore
from wanrl_s3.store.memory import MemoryStore
from wanrl_s3.testing.synthetic import nudge_state

ROOT = Path(__file__).resolve().parents[2]


class CountingStore(MemoryStore):
    """A memory store that counts GETs per key, and can damage the next reads of one key."""

    def __init__(self) -> None:
        super().__init__(uuid.uuid4().hex)
        self.gets: dict[str, int] = {}
        self.damage: dict[str, int] = {}  # key -> how many more reads come back damaged

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        self.gets[key] = self.gets.get(key, 0) + 1
        blob = super()._get(key, if_none_match=if_none_match, max_read_bytes=max_read_bytes)
        if blob is not None and self.damage.get(key, 0) > 0:
            self.damage[key] -= 1
            return Blob(blob.data[: len(blob.data) // 2], blob.etag)
        return blob


def _publish(store: ObjectStore, versions: int = 2) -> None:
    """Versions 1..n of one run: a keyframe, then deltas (each pins its base's digest)."""
    rng = np.random.default_rng(0)
    state = {n: rng.standard_normal(2048).astype(ml_dtypes.bfloat16) for n in ("a", "b")}
    pub = Publisher(store, PublishConfig(delta="always"), run_id="run-owner")
    for v in range(1, versions + 1):
        pub.publish(state, v)
        state = nudge_state(state, 0.02, seed=v)


def _rewrite(store: ObjectStore, key: str, data: bytes) -> None:
    store.delete([key])
    store.put_bytes(key, data)


def _edit_metadata(store: ObjectStore, version: int) -> None:
    """A valid manifest, but not the one published: its digest changes."""
    key = layout.manifest_key(version)
    d = json.loads(store.get_bytes(key))
    d["metadata"]["step"] = "999"
    _rewrite(store, key, json.dumps(d).encode())


def _point_latest_at(store: ObjectStore, pointer: Latest) -> None:
    _rewrite(store, layout.LATEST_KEY, pointer.to_json())


# -- the size bound ------------------------------------------------------------------
def test_an_oversized_manifest_is_refused_before_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = CountingStore()
    _publish(store, 1)
    key = layout.manifest_key(1)
    padded = store.get_bytes(key) + b" " * MAX_MANIFEST_BYTES  # still valid JSON
    _rewrite(store, key, padded)
    parsed: list[bytes] = []
    real = Manifest.from_json
    monkeypatch.setattr(
        Manifest, "from_json", lambda data, **kw: parsed.append(data) or real(data, **kw)
    )
    with pytest.raises(ManifestError, match=f"larger than the {MAX_MANIFEST_BYTES:,}-byte limit"):
        Manifests(store).get(1)
    assert parsed == []  # refused on its size alone


# -- the digest pins -----------------------------------------------------------------
def test_a_manifest_that_is_not_the_one_latest_pins_is_refused() -> None:
    store = CountingStore()
    _publish(store, 2)
    _edit_metadata(store, 2)
    assert Manifests(store).get(2).metadata["step"] == "999"  # unpinned, it parses
    reader = Manifests(store)
    reader.latest()
    store.gets.clear()
    with pytest.raises(ManifestError, match="not the one its successor or LATEST names"):
        reader.get(2)
    assert store.gets == {layout.manifest_key(2): 2}  # read once more before it is refused


def test_a_base_that_is_not_the_one_its_delta_pins_is_refused() -> None:
    store = CountingStore()
    _publish(store, 2)
    _edit_metadata(store, 1)
    assert Manifests(store).get(1).version == 1  # alone, nothing pins it
    reader = Manifests(store)
    assert reader.get(2).base_manifest_hash is not None
    with pytest.raises(ManifestError, match="not the one its successor or LATEST names"):
        reader.get(1)
    with pytest.raises(ManifestError):
        Manifests(store).chain(2)


# -- the cache -----------------------------------------------------------------------
def test_a_verified_manifest_is_read_once_then_served_from_the_cache() -> None:
    store = CountingStore()
    _publish(store, 2)
    key1, key2 = layout.manifest_key(1), layout.manifest_key(2)
    store.gets.clear()
    reader = Manifests(store)
    assert reader.get(1) is reader.get(1)
    assert store.gets == {key1: 1}
    assert reader.is_cached(1) and not reader.is_cached(2)
    small = Manifests(store, cache_size=1)
    for version in (1, 2, 1):  # v2 pushes v1 out
        small.get(version)
    assert store.gets == {key1: 3, key2: 1}


def test_a_damaged_read_is_read_once_more_and_a_second_one_fails() -> None:
    store = CountingStore()
    _publish(store, 1)
    key = layout.manifest_key(1)
    store.damage[key] = 1
    assert Manifests(store).get(1).version == 1
    store.damage[key] = 2
    with pytest.raises(ManifestError, match="not valid JSON"):
        Manifests(store).get(1)


def test_stored_bytes_are_the_manifest_as_stored_and_kept_only_when_asked() -> None:
    store = CountingStore()
    _publish(store, 1)
    assert Manifests(store, keep_bytes=True).stored_bytes(1) == store.get_bytes(
        layout.manifest_key(1)
    )
    with pytest.raises(UsageError, match="keep_bytes"):
        Manifests(store).stored_bytes(1)


# -- LATEST, followed ----------------------------------------------------------------
def test_latest_is_never_followed_backwards() -> None:
    store = CountingStore()
    _publish(store, 2)
    older = Latest.of(Manifests(store).get(1))
    reader = Manifests(store)
    assert reader.latest().version == 2  # type: ignore[union-attr]
    reader.get(2)  # followed: v2 is now the floor
    _point_latest_at(store, older)
    with pytest.raises(VerificationError, match="moved backwards from v2 to v1"):
        reader.latest()
    assert Manifests(store).latest().version == 1  # type: ignore[union-attr]  # a new reader


def test_a_pointer_to_a_version_that_never_appears_sets_no_floor() -> None:
    store = CountingStore()
    _publish(store, 2)
    served = store.get_bytes(layout.LATEST_KEY)
    ghost = Latest(version=3, run_id="run-owner", kind="full", keyframe_version=3,
                   published_at_s=time.time())  # fmt: skip
    reader = Manifests(store)
    _point_latest_at(store, ghost)
    assert reader.latest().version == 3  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):
        reader.get(3)
    _rewrite(store, layout.LATEST_KEY, served)
    assert reader.latest().version == 2  # type: ignore[union-attr]


# -- the claim rule ------------------------------------------------------------------
def test_a_version_must_be_newer_than_the_newest() -> None:
    require_newer(0, -1, "an empty store")
    require_newer(3, 2, "a store at v2")
    for version in (2, 1):
        with pytest.raises(VersionConflictError, match=r"\(LATEST names v2\); publish 3 or later"):
            require_newer(version, 2, "a store at v2")


def test_check_claimable_refuses_an_old_version_and_a_taken_one() -> None:
    store = CountingStore()
    _publish(store, 3)
    check_claimable(store, 4)
    with pytest.raises(VersionConflictError, match="version 3 is not newer than the newest"):
        check_claimable(store, 3)
    store.delete([layout.LATEST_KEY])  # the manifest alone claims its version
    with pytest.raises(VersionConflictError, match="version 3 already exists"):
        check_claimable(store, 3)
    check_claimable(store, 4)


def test_the_publisher_and_adopt_newest_refuse_a_stale_version_alike() -> None:
    store = CountingStore()
    _publish(store, 3)
    errors = []
    for attempt in (
        lambda: Publisher(store).publish({"a": np.zeros(4, np.float32)}, 2),
        lambda: adopt_newest(Publisher(store), publishing=2),
    ):
        with pytest.raises(VersionConflictError) as caught:
            attempt()
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "version 2 is not newer than the newest version" in errors[0]


# -- one owner -----------------------------------------------------------------------
OWNER = "wanrl_s3/format/manifests.py"
# Manifest.from_json outside the owner, each for a reason that is not a read from a store.
PARSE_ALLOWED = {
    "wanrl_s3/format/manifest.py": "Manifest.validate: the publisher's round trip before it writes",
    "wanrl_s3/publish/share_record.py": "a share's partial manifest, in a record read through "
    "format.manifests.read_bounded",
}
READS = {"get", "get_bytes", "get_or_none", "get_if_changed", "read_into"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _key_names(scope: ast.AST) -> set[str]:
    """Names that ``scope`` binds to a manifest key (``key = layout.manifest_key(v)``); a
    module's own, outside its functions and classes, or a function's."""
    nodes = list(ast.walk(scope))
    if isinstance(scope, ast.Module):
        defs = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        nodes = [n for stmt in scope.body if not isinstance(stmt, defs) for n in ast.walk(stmt)]
    return {
        t.id
        for n in nodes
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and _name(n.value.func) == "manifest_key"
        for t in n.targets
        if isinstance(t, ast.Name)
    }


def manifest_offences(source: str, path: str) -> list[str]:
    """Each place in ``source`` that parses a manifest or reads a manifest key."""
    tree = ast.parse(source)
    scopes: list[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    found = set()
    for scope in scopes:  # a call is judged in each function around it: one report per place
        keys = _key_names(scope)
        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "from_json"
                and _name(func.value) == "Manifest"
                and path not in PARSE_ALLOWED
            ):
                found.add(f"{path}:{call.lineno}: parses a manifest")
            args = [*call.args, *(k.value for k in call.keywords)]
            if _name(func) in READS and any(_is_key(a, keys) for a in args):
                found.add(f"{path}:{call.lineno}: reads a manifest key")
    return sorted(found)


def _is_key(arg: ast.AST, keys: set[str]) -> bool:
    if isinstance(arg, ast.Call):
        return _name(arg.func) == "manifest_key"
    return isinstance(arg, ast.Name) and arg.id in keys


def test_no_manifest_is_read_or_parsed_outside_its_owner() -> None:
    sources = sorted(p for top in ("wanrl_s3", "integrations") for p in (ROOT / top).rglob("*.py"))
    assert len(sources) > 50 and (ROOT / OWNER) in sources
    offences = [
        offence
        for p in sources
        if p.relative_to(ROOT).as_posix() != OWNER
        for offence in manifest_offences(
            p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix()
        )
    ]
    assert offences == [], (
        "read manifests through wanrl_s3.format.manifests (Manifests, read_stored):\n"
        + "\n".join(offences)
    )


@pytest.mark.parametrize(
    "source",
    [
        "m = Manifest.from_json(store.get_bytes(layout.manifest_key(v)), expect_version=v)",
        "blob = get_or_none(store, layout.manifest_key(version))",
        "key = layout.manifest_key(v)\ndata = store.get(key).data",
        "m = manifest.Manifest.from_json(data)",
        "store.read_into(key=manifest_key(v), offset=0, buf=buf)",
    ],
)
def test_the_scan_finds_each_way_of_reading_a_manifest(source: str) -> None:
    assert manifest_offences(source, "wanrl_s3/somewhere.py")


def test_the_scan_leaves_writes_and_listings_alone() -> None:
    source = (
        "store.put_bytes(layout.manifest_key(v), data, if_none_match=True)\n"
        "store.exists(layout.manifest_key(v))\n"
        "doomed = [layout.manifest_key(v) for v in gone]\n"
        "store.get_bytes(layout.payload_key(v, 'x'))\n"
    )
    assert manifest_offences(source, "wanrl_s3/somewhere.py") == []
