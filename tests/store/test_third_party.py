"""The contract suite, run as a third party runs it, on a backend with no optional feature."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import pytest

from wanrl_s3.store import MIN_PART_BYTES, ObjectStore
from wanrl_s3.testing import StoreContract

from .minimal import DictStore


class TestDictStore(StoreContract):
    @pytest.fixture
    def store(self) -> ObjectStore:
        return DictStore.from_url(f"dict://{uuid.uuid4().hex}")

    @pytest.fixture
    def store_through_faults(self) -> NoReturn:
        pytest.skip("DictStore keeps its objects in this process: nothing crosses a network")


def test_without_multipart_a_writer_sends_one_put(monkeypatch: pytest.MonkeyPatch) -> None:
    store = DictStore("dict://one-put")
    sizes: list[int] = []
    real_put = store._put

    def counted(key: str, data: bytes, **conditions: object) -> str:
        sizes.append(len(data))
        return real_put(key, data, **conditions)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_put", counted)
    payload = b"x" * (2 * MIN_PART_BYTES + 1)
    with (
        ThreadPoolExecutor(2) as pool,
        store.open_writer("a.bin", pool, part_bytes=MIN_PART_BYTES) as writer,
    ):
        writer.write(payload)
        assert not writer.is_multipart
        writer.close()
    assert sizes == [len(payload)] and store.get_bytes("a.bin") == payload
    assert store.pending_uploads() == []
