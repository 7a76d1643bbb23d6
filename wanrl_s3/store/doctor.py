"""What a store really does with the requests the protocol relies on, probed.

The commit protocol is only as safe as the store's answers: a store that
ignores ``If-None-Match: *`` lets two publishers of one version overwrite each
other without an error, one that ignores ``If-Match`` lets LATEST move
backwards, one with stale reads or listings makes ranks disagree. None of
that shows in a successful run. :func:`diagnose` writes a few small objects
under a scratch prefix, checks each property with them, removes them, and
returns one :class:`Finding` per property: whether it held, and what wanrl-s3
does about it. ``wanrl-s3 doctor`` prints them; the publisher runs
:func:`conditional_writes` (the two that no client-side measure can replace)
before its first write to a store.

Only the store's public helpers are used, plus two optional probes a backend
answers where it can (:meth:`ObjectStore._put_with_wrong_checksum`,
:meth:`ObjectStore._mpu_complete_if_absent`); a backend that cannot send such a
request says so, and the property is reported as not probed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import NotFoundError, PreconditionFailedError, StoreError, VerificationError
from .spec import ObjectStore

HELD = "held"
NOT_HELD = "NOT HELD"
NOT_PROBED = "not probed"


@dataclass(frozen=True)
class Finding:
    """One property of a store: what was seen, and what wanrl-s3 does about it."""

    name: str
    status: str  # HELD, NOT_HELD or NOT_PROBED
    seen: str  # what the store did, in a few words
    action: str  # what wanrl-s3 does about it
    guarantee: bool  # the protocol cannot be safe without it

    @property
    def broken(self) -> bool:
        """A guarantee the protocol relies on that this store does not keep."""
        return self.guarantee and self.status != HELD


@dataclass(frozen=True)
class _Probe:
    name: str
    guarantee: bool
    if_held: str
    if_not: str
    run: Callable[[ObjectStore, str], tuple[bool | None, str]]

    def finding(self, store: ObjectStore, scratch: str) -> Finding:
        try:
            held, seen = self.run(store, scratch)
        except PreconditionFailedError as exc:
            held, seen = False, f"a request it should take was refused ({exc})"
        except NotFoundError as exc:
            held, seen = False, f"an object just written was missing ({exc})"
        except VerificationError as exc:
            held, seen = False, f"an object just written came back short ({exc})"
        except StoreError as exc:  # refused or failed: the property cannot be relied on
            held, seen = False, f"the request failed: {exc}"
        status = NOT_PROBED if held is None else HELD if held else NOT_HELD
        # if_not empty: the backend says what it does instead (ObjectStore.upload_check)
        action = self.if_held if held else self.if_not or store.upload_check
        return Finding(self.name, status, seen, action, self.guarantee)


def _key(scratch: str, name: str) -> str:
    return f"{scratch}/{name}"


def _body(n_bytes: int) -> bytes:
    return os.urandom(n_bytes)


def _put_own(
    store: ObjectStore, key: str, data: bytes, *, if_none_match: bool = False, if_match: str = ""
) -> str:
    """A conditional PUT that must pass; its ETag.

    A refusal is read back first: when the object holds exactly ``data`` (random
    bytes no one else has), an earlier attempt of this same request landed and
    only its response was lost, so the retry was refused by our own write.
    """
    try:
        return store.put_bytes(key, data, if_none_match=if_none_match, if_match=if_match or None)
    except PreconditionFailedError:
        stored = store.get(key)
        if stored.data != data:
            raise
        return stored.etag


# -- the probes: each returns (held, what was seen); held None: not probed -----------
def _conditional_create(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "create")
    _put_own(store, key, _body(64), if_none_match=True)
    try:
        store.put_bytes(key, _body(64), if_none_match=True)
    except PreconditionFailedError:
        return True, "a second create of one key was refused"
    return False, "a second create of one key was accepted and overwrote the first"


def _compare_and_swap(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "cas")
    first = _put_own(store, key, _body(64), if_none_match=True)
    try:
        second = _put_own(store, key, _body(64), if_match=first)  # the current ETag: must pass
    except PreconditionFailedError:
        return False, f"a write at the current ETag ({first}) was refused"
    if second == first:
        return False, "the ETag did not change when the object did"
    try:
        store.put_bytes(key, _body(64), if_match=first)
    except PreconditionFailedError:
        return True, "a write at a stale ETag was refused, at the current one accepted"
    return False, "a write at a stale ETag was accepted"


def _mpu_conditional_create(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "multipart")
    store.put_bytes(key, _body(64))
    upload_id = store._mpu_create(key)
    try:  # one part: the last part of an upload may be of any size
        parts = [(1, store._mpu_put(key, upload_id, 1, _body(64)))]
        try:
            etag = store._mpu_complete_if_absent(key, upload_id, parts)
        except PreconditionFailedError:
            return True, "completing an upload onto an existing key was refused"
    finally:
        with contextlib.suppress(StoreError):
            store._mpu_abort(key, upload_id)
    if etag is None:
        return None, "this backend cannot send a conditional completion"
    return False, "completing an upload onto an existing key replaced it"


def _checksum_rejected(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    refused = store._put_with_wrong_checksum(_key(scratch, "checksum"), _body(1024))
    if refused is None:
        return None, "this backend sends no upload checksum"
    if refused:
        return True, "an upload whose checksum did not match its body was refused"
    return False, "an upload whose checksum did not match its body was stored"


def _read_after_write(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "read")
    for attempt in ("new", "overwritten"):
        data = _body(4096)
        etag = store.put_bytes(key, data)
        blob = store.get(key)
        if blob.data != data:
            return False, f"a GET right after a PUT ({attempt} object) returned other bytes"
        if blob.etag != etag:
            return False, f"a GET right after a PUT ({attempt} object) named another ETag"
    return True, "a GET right after a PUT (new and overwritten) returned its bytes"


def _list_after_write(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    prefix = _key(scratch, "list/")
    sizes = {f"{prefix}{i}": 100 + i for i in range(3)}
    for key, size in sizes.items():
        store.put_bytes(key, _body(size))
    listed = {o.key: o.size for o in store.list(prefix)}
    if listed != sizes:
        return False, f"a LIST right after 3 PUTs showed {len(listed)} objects (or wrong sizes)"
    gone = next(iter(sizes))
    store.delete([gone])
    if gone in {o.key for o in store.list(prefix)}:
        return False, "a LIST right after a DELETE still showed the object"
    return True, "a LIST right after PUTs and a DELETE showed exactly what is there"


def _range_reads(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "range")
    data = _body(10_000)
    store.put_bytes(key, data)
    for offset, length in ((0, 1), (1234, 4321), (9_000, 1_000)):
        buf = bytearray(length)
        store.read_into(key, offset, memoryview(buf))
        if bytes(buf) != data[offset : offset + length]:
            return False, f"bytes {offset}-{offset + length - 1} came back wrong (Range ignored?)"
    return True, "three ranges (first byte, middle, last bytes) came back exact"


def _etag_form(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "etag")
    data = _body(2048)
    etag = store.put_bytes(key, data)
    info = store.head(key)
    if info is None or info.etag != etag:
        return False, "HEAD named another ETag than the PUT returned"
    again = store.put_bytes(key, _body(2048))
    if again == etag:
        return False, "the ETag stayed the same when the bytes changed"
    md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
    form = "the MD5 of the body" if etag.strip('"') == md5 else "opaque (not an MD5)"
    return True, f"{form}; the same from PUT and HEAD, and new when the bytes change"


def _delete(store: ObjectStore, scratch: str) -> tuple[bool | None, str]:
    key = _key(scratch, "delete")
    store.put_bytes(key, _body(16))
    store.delete([key])
    if store.head(key) is not None:
        return False, "HEAD right after DELETE still found the object"
    try:
        store.get(key)
    except NotFoundError:
        pass
    else:
        return False, "GET right after DELETE still returned the object"
    store.delete([key])  # absent: not an error
    return True, "gone for HEAD and GET at once; deleting it again was no error"


CONDITIONAL_CREATE = _Probe(
    "conditional create (PUT If-None-Match: *)",
    True,
    "a manifest is created only if absent: a second publisher of a version is refused",
    "publish refuses this store: two publishers of one version would overwrite each other",
    _conditional_create,
)
COMPARE_AND_SWAP = _Probe(
    "compare-and-swap (PUT If-Match)",
    True,
    "LATEST moves only from the version it was read at, so it never moves backwards",
    "publish refuses this store: LATEST could not be moved safely",
    _compare_and_swap,
)
_PROBES = (
    CONDITIONAL_CREATE,
    _Probe(
        "conditional create on multipart completion",
        False,
        "not needed: manifests and share records go up whole, payload under fresh names",
        "not needed: manifests and share records go up whole, payload under fresh names",
        _mpu_conditional_create,
    ),
    COMPARE_AND_SWAP,
    _Probe(
        "upload with a wrong checksum refused",
        False,
        "every upload carries its checksum; a damaged one is refused and sent again",
        "",  # the backend's own answer: ObjectStore.upload_check
        _checksum_rejected,
    ),
    _Probe(
        "read-after-write",
        True,
        "a lost response to a conditional write is resolved by reading the object back",
        "unsafe: resolving a lost response by reading back could report a success as failed",
        _read_after_write,
    ),
    _Probe(
        "list-after-write",
        True,
        "ranks and restarted publishers count the same committed versions",
        "unsafe: ranks could disagree on keyframe or delta; gc could miss new versions",
        _list_after_write,
    ),
    _Probe(
        "range reads",
        True,
        "downloads are parallel ranged GETs, resumed at the last byte received",
        "unsafe: ranged downloads would read wrong bytes (every tensor would fail its hash)",
        _range_reads,
    ),
    _Probe(
        "ETag form",
        True,
        "ETags drive compare-and-swap and the watchers' conditional GETs",
        "unsafe: compare-and-swap and change polling need an ETag that follows the bytes",
        _etag_form,
    ),
    _Probe(
        "delete",
        True,
        "gc deletes old versions and leftovers and relies on them being gone",
        "unsafe: gc could leave what it deleted visible",
        _delete,
    ),
)


def diagnose(store: ObjectStore, scratch: str) -> list[Finding]:
    """Every property, probed with objects under ``scratch`` (removed afterwards)."""
    try:
        findings = [probe.finding(store, scratch) for probe in _PROBES]
    finally:
        remove_scratch(store, scratch)
    return findings


def conditional_writes(store: ObjectStore, scratch: str) -> list[Finding]:
    """The two conditional writes the commit protocol cannot do without, probed."""
    try:
        return [probe.finding(store, scratch) for probe in (CONDITIONAL_CREATE, COMPARE_AND_SWAP)]
    finally:
        remove_scratch(store, scratch)


def remove_scratch(store: ObjectStore, scratch: str) -> None:
    """Delete every object and abort every upload a check left under ``scratch``."""
    for pending in store.pending_uploads(f"{scratch}/"):
        store.abort_upload(pending)
    store.delete([o.key for o in store.list(f"{scratch}/")])
