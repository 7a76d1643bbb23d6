"""ObjectWriter: parts of exactly ``part_bytes`` whatever the sizes of the writes."""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from wanrl_s3.store import MIN_PART_BYTES
from wanrl_s3.store.memory import MemoryStore

PART = MIN_PART_BYTES


class PartRecorder(MemoryStore):
    """A memory store that records the size of every part it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.part_sizes: dict[int, int] = {}

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        assert isinstance(data, bytes)  # never a view of the caller's memory
        self.part_sizes[part_number] = len(data)
        return super()._mpu_put(key, upload_id, part_number, data)


@pytest.mark.parametrize(
    "cuts",
    [
        [],  # one write of the whole object
        [PART // 2],  # a part that spans two writes, then whole parts in one write
        [PART, 2 * PART],  # writes of exactly one part
        [1, PART + 1, 2 * PART + 7],
    ],
)
def test_parts_are_whole_whatever_the_writes(cuts: list[int]) -> None:
    payload = os.urandom(3 * PART + 123)
    store = PartRecorder()
    bounds = [0, *cuts, len(payload)]
    with ThreadPoolExecutor(4) as pool, store.open_writer("o.bin", pool, part_bytes=PART) as w:
        for lo, hi in itertools.pairwise(bounds):
            piece = bytearray(payload[lo:hi])
            w.write(memoryview(piece))
            piece[:] = bytes(len(piece))  # the caller reuses its buffer: sent bytes must not move
        w.close()
    assert store.get_bytes("o.bin") == payload
    assert store.part_sizes == {1: PART, 2: PART, 3: PART, 4: 123}


def test_an_object_of_exactly_one_part_is_one_put() -> None:
    store = PartRecorder()
    with ThreadPoolExecutor(2) as pool, store.open_writer("o.bin", pool, part_bytes=PART) as w:
        w.write(bytes(PART))
        assert not w.is_multipart
        w.close()
    assert store.part_sizes == {}
    assert store.get_bytes("o.bin") == bytes(PART)
