"""The store contract: the behaviour the rest of wanrl-s3 relies on, written once.

Like fsspec's ``tests/abstract`` and zarr-python's ``StoreTests``: a backend's
test module subclasses :class:`StoreContract` and provides a ``store`` fixture
that returns a fresh, empty store; every test here then runs against it. Our
own memory://, file://, s3://, gs:// and az:// backends run it in
``tests/store/``; a third-party backend runs it the same way::

    import pytest
    from wanrl_s3.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self):
            return MyStore(...)

        @pytest.fixture
        def other_store(self):  # only where MyStore declares supports_copy_from
            return MyStore(...)  # another bucket on the same service

A case for a feature the backend declares it lacks (its capability flags:
``supports_multipart``, ``supports_server_side_copy``, ``supports_copy_from``)
is skipped, saying so; one it declares is tested, never passed silently. The
case that deletes 1,003 keys is marked ``slow`` (register the marker, or
deselect it with ``-m "not slow"``); a quick one deletes in batches of 7.

Needs pytest (``pip install 'wanrl-s3[dev]'``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import pytest

from ..errors import (
    NotFoundError,
    ObjectTooLargeError,
    PreconditionFailedError,
    TransientStoreError,
    UsageError,
    VerificationError,
)
from ..store import (
    MIN_PART_BYTES,
    Blob,
    FakeClock,
    ObjectStore,
    RetryPolicy,
    compare_and_swap,
    open_store,
)
from ..store.local import LocalStore
from ..store.memory import MemoryStore
from .faults import Fault, FaultProxy, Rule

_SLOW = pytest.mark.slow  # registered by wanrl-s3's own pytest configuration
_DATA = bytes(range(256)) * 40  # 10,240 bytes, every offset distinct modulo 256
_OVER_ONE_PART = bytes(range(256)) * (MIN_PART_BYTES // 256 + 4096)  # a part and 1 MiB


def _keys(store: ObjectStore, folder: str = "", name_prefix: str = "") -> list[str]:
    return [o.key for o in store.list(folder, name_prefix=name_prefix)]


def _fake_clock(store: ObjectStore) -> FakeClock:
    """Put ``store``'s retries on fake time; its sleeps are then recorded, not slept."""
    clock = FakeClock()
    store.retry = RetryPolicy(clock=clock)
    return clock


def _record_read_starts(monkeypatch: pytest.MonkeyPatch, store: ObjectStore) -> list[int]:
    """The offset of every ``_read_into`` call from now on: a retry asks at one offset twice."""
    starts: list[int] = []
    real_read = store._read_into

    def recorded(key: str, offset: int, buf: memoryview) -> int:
        starts.append(offset)
        return real_read(key, offset, buf)

    monkeypatch.setattr(store, "_read_into", recorded)
    return starts


def _refuse_reads(monkeypatch: pytest.MonkeyPatch, store: ObjectStore) -> None:
    """Make any read of ``store`` through this process fail the test."""

    def refused(*_: object, **__: object) -> NoReturn:
        raise AssertionError("a server-side copy read the object through this process")

    monkeypatch.setattr(store, "_get", refused)
    monkeypatch.setattr(store, "_read_into", refused)


@contextlib.contextmanager
def through_fault_proxy(
    store: ObjectStore, upstream: str, *, path: str = ""
) -> Iterator[tuple[ObjectStore, FaultProxy]]:
    """``store`` opened again through a FaultProxy in front of ``upstream`` (its service's
    address; ``path`` follows the proxy's in the endpoint URL): a ``store_through_faults``."""
    with FaultProxy(upstream) as proxy:
        yield open_store(store.url, endpoint_url=proxy.url + path), proxy


def _skip_unless(store: ObjectStore, flag: str, otherwise: str) -> None:
    if not getattr(store, flag):
        pytest.skip(f"{type(store).__name__} declares {flag} = False: {otherwise}")


class StoreContract:
    """Mix-in of contract tests; the subclass supplies the ``store`` fixture."""

    @pytest.fixture
    def other_store(self) -> ObjectStore:
        """Another fresh store on the same service as ``store`` (another bucket).

        Only the copy-from case asks for it, and only where the backend declares
        ``supports_copy_from``: such a backend's test class must override this.
        """
        pytest.fail(
            "the store declares supports_copy_from = True: give its StoreContract class an "
            "`other_store` fixture (a second bucket on the same service) to test it"
        )

    @pytest.fixture
    def store_through_faults(self, store: ObjectStore) -> tuple[ObjectStore, FaultProxy]:
        """``store``'s bucket reached through a :class:`~wanrl_s3.testing.FaultProxy` in
        front of its service, as ``(store, proxy)`` (a generator fixture stops the proxy).

        A backend that sends its requests over HTTP overrides this (with
        :func:`through_fault_proxy`), so that the case for uploads damaged in transit
        runs against it; one that sends nothing over a network (memory://, file://)
        skips it, saying so.
        """
        if isinstance(store, MemoryStore | LocalStore):
            pytest.skip(f"{type(store).__name__} sends no bytes over a network to be damaged")
        pytest.fail(
            "give the StoreContract class a `store_through_faults` fixture: the store's "
            "service reached through a wanrl_s3.testing.FaultProxy, as (store, proxy)"
        )

    # -- objects, conditions, ETags --------------------------------------------
    def test_put_get_head_list_delete(self, store: ObjectStore) -> None:
        """The primitives: a put reads back whole, HEAD gives its size and ETag, a listing is by
        folder, a delete skips absent keys, and a deleted key is not found."""
        etag = store.put_bytes("a/b/one.bin", b"hello")
        assert store.get_bytes("a/b/one.bin") == b"hello"
        info = store.head("a/b/one.bin")
        assert info is not None and info.size == 5 and info.etag == etag
        store.put_bytes("a/two.bin", b"x" * 10)
        assert _keys(store, "a/") == ["a/b/one.bin", "a/two.bin"]
        assert _keys(store, "a/b/") == ["a/b/one.bin"]
        store.delete(["a/b/one.bin", "a/missing.bin"])
        assert store.head("a/b/one.bin") is None
        with pytest.raises(NotFoundError):
            store.get_bytes("a/b/one.bin")

    def test_create_only_if_absent(self, store: ObjectStore) -> None:
        """A put with ``if_none_match`` creates a key once; a second is refused, the first kept."""
        store.put_bytes("m.json", b"first", if_none_match=True)
        with pytest.raises(PreconditionFailedError):
            store.put_bytes("m.json", b"second", if_none_match=True)
        assert store.get_bytes("m.json") == b"first"

    def test_compare_and_swap(self, store: ObjectStore) -> None:
        """A swap wins only from the ETag it read (or from absent); a stale one writes nothing."""
        e1 = compare_and_swap(store, "LATEST", None, b"1")
        with pytest.raises(PreconditionFailedError):
            compare_and_swap(store, "LATEST", None, b"x")
        e2 = compare_and_swap(store, "LATEST", e1, b"2")
        with pytest.raises(PreconditionFailedError):
            compare_and_swap(store, "LATEST", e1, b"3")  # stale ETag loses
        assert store.get_bytes("LATEST") == b"2"
        assert e2 != e1

    def test_conditional_get(self, store: ObjectStore) -> None:
        """A read with the current ETag returns None; after a write, the new bytes."""
        etag = store.put_bytes("LATEST", b"v1")
        assert store.get_if_changed("LATEST", etag) is None
        store.put_bytes("LATEST", b"v2")
        blob = store.get_if_changed("LATEST", etag)
        assert blob is not None and blob.data == b"v2"

    def test_the_etag_changes_on_every_overwrite(self, store: ObjectStore) -> None:
        """LATEST's compare-and-swap is only as good as this: an ETag names one content."""
        etags = []
        for body in (b"v/000001", b"v/000002", b"v/000003"):  # one size: only bytes differ
            etag = store.put_bytes("LATEST", body)
            info, blob = store.head("LATEST"), store.get("LATEST")
            assert info is not None and info.etag == etag and blob.etag == etag
            assert blob.data == body
            etags.append(etag)
        assert len(set(etags)) == 3, etags
        for stale in etags[:2]:
            with pytest.raises(PreconditionFailedError):
                compare_and_swap(store, "LATEST", stale, b"v/000009")
            assert store.get_if_changed("LATEST", stale) is not None
        assert store.get_bytes("LATEST") == b"v/000003"

    # -- listing and deleting ---------------------------------------------------
    def test_listing_is_folder_like(self, store: ObjectStore) -> None:
        """``list("c")`` is what lies under ``c/``: never ``cc/0``, nor ``c.json``."""
        keys = ["c/0", "c/d/1", "c/dx.bin", "cc/0", "c.json", "d/c/0"]
        for key in keys:
            store.put_bytes(key, b"x")
        assert _keys(store, "c") == _keys(store, "c/") == ["c/0", "c/d/1", "c/dx.bin"]
        assert _keys(store, "cc") == ["cc/0"]
        assert _keys(store, "c/d") == ["c/d/1"]
        assert _keys(store, "c", "d") == ["c/d/1", "c/dx.bin"]  # names in c/ that start with d
        assert _keys(store, "nothing") == []
        assert _keys(store) == sorted(keys)
        # the primitive under it is a plain string prefix, which name_prefix relies on
        assert sorted(o.key for o in store._list("c")) == sorted(set(keys) - {"d/c/0"})
        with pytest.raises(UsageError):
            store.list("c//d")

    @pytest.mark.parametrize(
        "batch_keys",
        [pytest.param(7, id="batches-of-7"), pytest.param(None, id="1003-keys", marks=_SLOW)],
    )
    def test_deleting_more_keys_than_one_request_takes(
        self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch, batch_keys: int | None
    ) -> None:
        """Retention deletes whole versions; S3 takes 1,000 keys a request, so they go in batches.

        The real size (1,003 keys, every backend's ``_delete`` given 1,000 at
        once) is marked slow; batches of 7 check the same path quickly.
        """
        if batch_keys is not None:
            monkeypatch.setattr(store, "max_delete_keys", batch_keys)
        keys = [f"many/{i:05d}" for i in range(store.max_delete_keys + 3)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: store.put_bytes(key, b""), keys))
        store.put_bytes("kept/0", b"k")
        batches: list[int] = []
        real_delete = store._delete

        def counted(batch: list[str]) -> None:
            batches.append(len(batch))
            real_delete(batch)

        monkeypatch.setattr(store, "_delete", counted)
        store.delete([*keys, "many/absent"])
        assert _keys(store, "many") == []
        assert _keys(store) == ["kept/0"]
        assert batches == [store.max_delete_keys, 4], batches

    # -- reads ------------------------------------------------------------------
    def test_ranged_read_into(self, store: ObjectStore) -> None:
        """A ranged read fills the buffer with exactly the bytes at its offset, the tail too."""
        data = bytes(range(256)) * 100
        store.put_bytes("r.bin", data)
        buf = bytearray(1000)
        store.read_into("r.bin", 123, memoryview(buf))
        assert bytes(buf) == data[123:1123]
        tail = bytearray(500)
        store.read_into("r.bin", len(data) - 500, memoryview(tail))
        assert bytes(tail) == data[-500:]

    def test_a_stream_that_breaks_mid_read_resumes_at_the_last_byte(
        self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A read that ends short asks again for only the missing bytes, without a wait; a reset
        retries after one backoff."""
        store.put_bytes("r.bin", _DATA)
        clock = _fake_clock(store)
        real_read = store._read_into
        script = iter(["short", "reset", "short"])  # then whole reads
        starts: list[int] = []

        def breaking(key: str, offset: int, buf: memoryview) -> int:
            starts.append(offset)
            step = next(script, "whole")
            if step == "reset":  # the connection dropped before any byte
                raise TransientStoreError("connection reset by peer")
            if step == "short":  # the stream broke after a third of the range
                return real_read(key, offset, buf[: len(buf) // 3])
            return real_read(key, offset, buf)

        monkeypatch.setattr(store, "_read_into", breaking)
        buf = bytearray(9000)
        store.read_into("r.bin", 1000, memoryview(buf))
        assert bytes(buf) == _DATA[1000:10000]
        assert starts == [1000, 4000, 4000, 6000]  # each retry asks only for what is missing
        assert len(clock.sleeps) == 1  # a backoff after the reset, none after a short read

    @pytest.mark.parametrize(
        "offset, length",
        [(500, 1000), (1000, 10), (5000, 10)],
        ids=["runs-past-the-end", "starts-at-the-end", "starts-beyond-the-end"],
    )
    def test_a_read_past_the_end_is_a_verification_error_without_retries(
        self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch, offset: int, length: int
    ) -> None:
        """A truncated object is damage no retry repairs: refused at once, not after backoff.

        The size check's HEAD may itself be retried (fake-gcs-server closes the
        connection after a 416, so the next request can meet a reset); the read is not.
        """
        _fake_clock(store)
        store.put_bytes("obj.bin", bytes(range(250)) * 4)  # 1000 bytes
        starts = _record_read_starts(monkeypatch, store)
        with pytest.raises(VerificationError, match=r"holds 1000 bytes.*truncated"):
            store.read_into("obj.bin", offset, memoryview(bytearray(length)))
        assert 1 <= len(starts) <= 2 and len(set(starts)) == len(starts), starts

    def test_a_read_of_a_missing_object_is_not_found(
        self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A read of a missing object raises NotFoundError at once: one request, no backoff."""
        clock = _fake_clock(store)
        starts = _record_read_starts(monkeypatch, store)
        with pytest.raises(NotFoundError):
            store.read_into("gone.bin", 0, memoryview(bytearray(10)))
        assert starts == [0] and clock.sleeps == []

    # -- bounded reads -------------------------------------------------------------
    def test_a_bounded_read_holds_at_most_the_limit_and_one_byte(
        self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Anyone who can write a bucket can make LATEST a gigabyte: a bounded read is one
        request that keeps at most one byte past the reader's limit, whatever the size."""
        store.put_bytes("big.json", _DATA)  # 10,240 bytes
        reads: list[tuple[int | None, int]] = []  # (bytes asked for, bytes the primitive gave)
        real_get = store._get

        def recorded(key: str, **kwargs: Any) -> Blob | None:
            blob = real_get(key, **kwargs)
            reads.append((kwargs.get("max_read_bytes"), -1 if blob is None else len(blob.data)))
            return blob

        monkeypatch.setattr(store, "_get", recorded)
        assert store.get("big.json", max_bytes=len(_DATA)).data == _DATA  # at the limit: whole
        with pytest.raises(ObjectTooLargeError, match=r"big\.json is larger than 1,000 bytes"):
            store.get_bytes("big.json", max_bytes=1000)
        with pytest.raises(ObjectTooLargeError):
            store.get_if_changed("big.json", '"another etag"', max_bytes=1000)
        assert reads == [(len(_DATA) + 1, len(_DATA)), (1001, 1001), (1001, 1001)]

    def test_a_bounded_read_of_an_empty_object_or_an_unchanged_one(
        self, store: ObjectStore
    ) -> None:
        """A range of an empty object is unsatisfiable (HTTP 416): it still reads as empty,
        with its ETag; a conditional bounded read of an unchanged object gives None."""
        etag = store.put_bytes("empty.json", b"")
        blob = store.get("empty.json", max_bytes=100)
        assert blob.data == b"" and blob.etag == etag
        assert store.get_if_changed("empty.json", etag, max_bytes=100) is None
        etag = store.put_bytes("p.json", b"pointer")
        assert store.get_if_changed("p.json", etag, max_bytes=0) is None  # not even one byte read
        store.put_bytes("p.json", b"pointer 2")
        changed = store.get_if_changed("p.json", etag, max_bytes=9)
        assert changed is not None and changed.data == b"pointer 2" and changed.etag != etag
        with pytest.raises(NotFoundError):
            store.get("absent.json", max_bytes=10)
        with pytest.raises(UsageError, match="max_bytes"):
            store.get("p.json", max_bytes=-1)

    # -- uploads damaged in transit ------------------------------------------------
    @pytest.mark.parametrize("how", ["put", "create", "swap", "multipart"])
    def test_an_upload_damaged_in_transit_is_never_reported_as_written(
        self, request: pytest.FixtureRequest, how: str
    ) -> None:
        """One bit flipped between this process and the service (a bad NIC, a broken
        middlebox), inside a whole object's body or a part's: the write returns only once
        the service holds the bytes sent, whether or not it checks what it is sent. A
        compare-and-swap (LATEST's) still succeeds: a damaged write of its own is no
        other writer's move."""
        store, proxy = request.getfixturevalue("store_through_faults")
        data = _OVER_ONE_PART if how == "multipart" else _DATA * 10
        etag = store.put_bytes("d.bin", b"before") if how == "swap" else None
        proxy.set_rules([Rule(Fault.FLIP_REQUEST, min_body_bytes=len(_DATA) * 5, count=1)])
        if how == "multipart":
            with (
                ThreadPoolExecutor(2) as pool,
                store.open_writer("d.bin", pool, part_bytes=MIN_PART_BYTES) as writer,
            ):
                writer.write(data)
                writer.close()
        elif how == "swap":
            compare_and_swap(store, "d.bin", etag, data)
        else:
            store.put_bytes("d.bin", data, if_none_match=how == "create")
        assert proxy.counts[Fault.FLIP_REQUEST] == 1, "no upload body was damaged"
        proxy.clear()
        assert store.get_bytes("d.bin") == data
        assert store.pending_uploads() == []

    # -- writers and multipart uploads --------------------------------------------
    def test_multipart_writer_and_abort(self, store: ObjectStore) -> None:
        """A writer uploads in parts where the store has them; an exception in its block leaves
        neither an object nor a pending upload."""
        payload = bytes(range(256)) * (MIN_PART_BYTES // 256) + b"tail"
        with ThreadPoolExecutor(4) as pool:
            with store.open_writer("big.bin", pool, part_bytes=MIN_PART_BYTES) as w:
                w.write(payload[:1000])
                w.write(payload[1000:])
                assert w.is_multipart == store.supports_multipart
                w.close()
            assert store.get_bytes("big.bin") == payload
            with (
                pytest.raises(RuntimeError),
                store.open_writer("gone.bin", pool, part_bytes=MIN_PART_BYTES) as w,
            ):
                w.write(payload)  # more than one part: a multipart upload where there are any
                raise RuntimeError("publisher crashed")
        assert store.head("gone.bin") is None
        assert [u for u in store.pending_uploads() if u.key == "gone.bin"] == []

    def test_pending_uploads_listed_until_aborted(self, store: ObjectStore) -> None:
        """Multipart uploads never completed are listed (by folder, as ``list``) until aborted."""
        _skip_unless(store, "supports_multipart", "a writer sends whole objects")
        upload_id = store._mpu_create("up/stale.bin")
        other_id = store._mpu_create("upx/other.bin")
        pending = store.pending_uploads("up")  # folder-like, as list()
        assert [(u.key, u.upload_id) for u in pending] == [("up/stale.bin", upload_id)]
        assert {u.upload_id for u in store.pending_uploads()} >= {upload_id, other_id}
        for upload in store.pending_uploads():
            store.abort_upload(upload)
        assert store.pending_uploads() == []

    # -- copies -----------------------------------------------------------------
    def test_copy(self, store: ObjectStore) -> None:
        """``copy`` duplicates an object under another key."""
        store.put_bytes("src.bin", b"abc")
        store.copy("src.bin", "dst/copy.bin")
        assert store.get_bytes("dst/copy.bin") == b"abc"

    def test_server_side_copy_reads_nothing_through_this_process(
        self, store: ObjectStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A server-side ``copy`` moves no byte through this process (over an existing object, and
        for an empty one), and a missing source raises NotFoundError."""
        _skip_unless(store, "supports_server_side_copy", "copy() reads and writes the bytes")
        store.put_bytes("src/a.bin", _DATA)
        store.put_bytes("src/empty.bin", b"")
        store.put_bytes("dst/a.bin", b"an older object")
        _refuse_reads(monkeypatch, store)
        store.copy("src/a.bin", "dst/a.bin")  # over an existing object
        store.copy("src/empty.bin", "dst/empty.bin")
        with pytest.raises(NotFoundError):
            store.copy("src/absent.bin", "dst/absent.bin")
        monkeypatch.undo()
        assert store.get_bytes("dst/a.bin") == _DATA
        assert store.get_bytes("dst/empty.bin") == b""
        assert store.head("dst/absent.bin") is None

    def test_copy_from_a_store_of_the_same_service_is_server_side(
        self, store: ObjectStore, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``copy_from`` a store on the same service copies server-side: nothing is read here."""
        _skip_unless(store, "supports_copy_from", "copy_from() streams through this process")
        other: ObjectStore = request.getfixturevalue("other_store")
        other.put_bytes("v/a.bin", _DATA)
        other.put_bytes("v/empty.bin", b"")
        _refuse_reads(monkeypatch, other)
        with ThreadPoolExecutor(2) as pool:
            for key, size in (("v/a.bin", len(_DATA)), ("v/empty.bin", 0)):
                assert store.copy_from(
                    other, key, f"w/{key}", size=size, executor=pool, part_bytes=MIN_PART_BYTES
                )
        assert store.get_bytes("w/v/a.bin") == _DATA and store.get_bytes("w/v/empty.bin") == b""

    def test_copy_from_another_service_is_streamed_in_parts(self, store: ObjectStore) -> None:
        """``copy_from`` a store of another service streams the bytes through here in parts,
        returns False, and leaves no pending upload."""
        source = MemoryStore(uuid.uuid4().hex)
        source.put_bytes("v/a.bin", _OVER_ONE_PART)
        with ThreadPoolExecutor(4) as pool:
            server_side = store.copy_from(
                source, "v/a.bin", "v/b.bin", size=len(_OVER_ONE_PART), executor=pool,
                part_bytes=MIN_PART_BYTES,
            )  # fmt: skip
        assert not server_side and store.get_bytes("v/b.bin") == _OVER_ONE_PART
        assert store.pending_uploads() == []

    @pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "a/./b", "", "a/../b", "a b"])
    def test_keys_that_escape_are_refused_before_io(self, store: ObjectStore, key: str) -> None:
        """A key that could escape its prefix or alias another (``..``, absolute, empty or ``.``
        segments, spaces) raises UsageError before any request."""
        with pytest.raises(UsageError):
            store.put_bytes(key, b"x")
