"""The store contract: the behaviour the rest of wanrl-s3 relies on, written once.

Like fsspec's ``tests/abstract``: a backend's test module subclasses
:class:`StoreContract` and provides a ``store`` fixture that yields a fresh, empty
store; every test here then runs against it. Our own memory://, file://, s3://
backends run it in ``tests/store/test_contract.py``; a third-party backend runs it
the same way::

    import pytest
    from wanrl_s3.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self):
            return MyStore(...)

Needs pytest (``pip install 'wanrl-s3[dev]'``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ..errors import NotFoundError, PreconditionFailedError, UsageError
from ..store import MIN_PART_BYTES, ObjectStore, compare_and_swap


class StoreContract:
    """Mix-in of contract tests; the subclass supplies the ``store`` fixture."""

    def test_put_get_head_list_delete(self, store: ObjectStore) -> None:
        etag = store.put_bytes("a/b/one.bin", b"hello")
        assert store.get_bytes("a/b/one.bin") == b"hello"
        info = store.head("a/b/one.bin")
        assert info is not None and info.size == 5 and info.etag == etag
        store.put_bytes("a/two.bin", b"x" * 10)
        assert [o.key for o in store.list("a/")] == ["a/b/one.bin", "a/two.bin"]
        assert [o.key for o in store.list("a/b/")] == ["a/b/one.bin"]
        store.delete(["a/b/one.bin", "a/missing.bin"])
        assert store.head("a/b/one.bin") is None
        with pytest.raises(NotFoundError):
            store.get_bytes("a/b/one.bin")

    def test_create_only_if_absent(self, store: ObjectStore) -> None:
        store.put_bytes("m.json", b"first", if_none_match=True)
        with pytest.raises(PreconditionFailedError):
            store.put_bytes("m.json", b"second", if_none_match=True)
        assert store.get_bytes("m.json") == b"first"

    def test_compare_and_swap(self, store: ObjectStore) -> None:
        e1 = compare_and_swap(store, "LATEST", None, b"1")
        with pytest.raises(PreconditionFailedError):
            compare_and_swap(store, "LATEST", None, b"x")
        e2 = compare_and_swap(store, "LATEST", e1, b"2")
        with pytest.raises(PreconditionFailedError):
            compare_and_swap(store, "LATEST", e1, b"3")  # stale ETag loses
        assert store.get_bytes("LATEST") == b"2"
        assert e2 != e1

    def test_conditional_get(self, store: ObjectStore) -> None:
        etag = store.put_bytes("LATEST", b"v1")
        assert store.get_if_changed("LATEST", etag) is None
        store.put_bytes("LATEST", b"v2")
        blob = store.get_if_changed("LATEST", etag)
        assert blob is not None and blob.data == b"v2"

    def test_ranged_read_into(self, store: ObjectStore) -> None:
        data = bytes(range(256)) * 100
        store.put_bytes("r.bin", data)
        buf = bytearray(1000)
        store.read_into("r.bin", 123, memoryview(buf))
        assert bytes(buf) == data[123:1123]

    def test_multipart_writer_and_abort(self, store: ObjectStore) -> None:
        payload = bytes(range(256)) * (MIN_PART_BYTES // 256) + b"tail"
        with ThreadPoolExecutor(4) as pool:
            with store.open_writer("big.bin", pool, part_bytes=MIN_PART_BYTES) as w:
                w.write(payload[:1000])
                w.write(payload[1000:])
                w.close()
            assert store.get_bytes("big.bin") == payload
            with (
                pytest.raises(RuntimeError),
                store.open_writer("gone.bin", pool, part_bytes=MIN_PART_BYTES) as w,
            ):
                w.write(payload)  # starts a multipart upload (more than one part)
                raise RuntimeError("publisher crashed")
        assert store.head("gone.bin") is None
        assert [u for u in store.pending_uploads() if u.key == "gone.bin"] == []

    def test_pending_uploads_listed_until_aborted(self, store: ObjectStore) -> None:
        upload_id = store._mpu_create("stale.bin")
        pending = [u for u in store.pending_uploads() if u.key == "stale.bin"]
        assert [u.upload_id for u in pending] == [upload_id]
        store.abort_upload(pending[0])
        assert [u for u in store.pending_uploads() if u.key == "stale.bin"] == []

    def test_copy(self, store: ObjectStore) -> None:
        store.put_bytes("src.bin", b"abc")
        store.copy("src.bin", "dst/copy.bin")
        assert store.get_bytes("dst/copy.bin") == b"abc"

    @pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "a/./b", "", "a/../b", "a b"])
    def test_keys_that_escape_are_refused_before_io(self, store: ObjectStore, key: str) -> None:
        with pytest.raises(UsageError):
            store.put_bytes(key, b"x")
