"""ObjectWriter: parts of exactly ``part_bytes`` whatever the sizes of the writes,
in part buffers used again only once their part was sent."""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from wanrl_s3.store import MIN_PART_BYTES, PartSlots
from wanrl_s3.store.memory import MemoryStore

PART = MIN_PART_BYTES


class PartRecorder(MemoryStore):
    """A memory store that records the size of every part it is sent."""

    takes_part_buffers = False

    def __init__(self) -> None:
        super().__init__()
        self.part_sizes: dict[int, int] = {}
        self.buffers: list[int] = []  # id() of every full part's buffer

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        # never a view of the caller's memory: bytes, or a buffer of the writer's own
        assert isinstance(
            data, bytearray if self.takes_part_buffers and len(data) == PART else bytes
        )
        self.part_sizes[part_number] = len(data)
        self.buffers.append(id(data))
        return super()._mpu_put(key, upload_id, part_number, data)


class BufferBorrower(PartRecorder):
    """Takes the writer's part buffers, as the az:// and file:// stores do."""

    takes_part_buffers = True


@pytest.mark.parametrize("store_class", [PartRecorder, BufferBorrower])
@pytest.mark.parametrize(
    "cuts",
    [
        [],  # one write of the whole object
        [PART // 2],  # a part that spans two writes, then whole parts in one write
        [PART, 2 * PART],  # writes of exactly one part
        [1, PART + 1, 2 * PART + 7],
    ],
)
def test_parts_are_whole_whatever_the_writes(
    cuts: list[int], store_class: type[PartRecorder]
) -> None:
    payload = os.urandom(3 * PART + 123)
    store = store_class()
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


class HeldFirstPart(BufferBorrower):
    """Holds part 1 inside ``_mpu_put`` until ``release`` is set, then checks that its
    buffer still holds what it was given: the request may still be reading it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.changed_while_sent = False

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        if part_number == 1:
            sent = bytes(data)
            assert self.release.wait(10), "the test never let part 1 finish"
            self.changed_while_sent = bytes(data) != sent
        return super()._mpu_put(key, upload_id, part_number, data)


def test_a_buffer_is_not_filled_again_while_its_part_is_being_sent() -> None:
    payload = os.urandom(4 * PART + 5)
    store = HeldFirstPart()
    slots = PartSlots(8)  # room for every part: the writer never waits for part 1
    with (
        ThreadPoolExecutor(4) as pool,
        store.open_writer("o.bin", pool, part_bytes=PART, slots=slots) as w,
    ):
        w.write(payload)  # parts 2-4 gathered and sent while part 1 is held
        store.release.set()
        w.close()
    assert not store.changed_while_sent
    assert store.get_bytes("o.bin") == payload


def test_writers_sharing_slots_use_the_same_buffers_again() -> None:
    """The point of PartSlots: the second object's parts fill buffers the first one's
    parts were sent from (already written once: no page faults), no more buffers are
    made than there are slots, and both objects come back whole."""
    store = BufferBorrower()
    slots = PartSlots(4)
    first, second = os.urandom(3 * PART), os.urandom(3 * PART)
    with ThreadPoolExecutor(4) as pool:
        for key, payload in (("a.bin", first), ("b.bin", second)):
            with store.open_writer(key, pool, part_bytes=PART, slots=slots) as w:
                w.write(payload)
                w.close()
    assert store.get_bytes("a.bin") == first
    assert store.get_bytes("b.bin") == second
    # the second object's first part always fills a buffer the first object gave back (its
    # later parts may too, or find them still in flight: timing); never more than the slots
    assert set(store.buffers[3:]) & set(store.buffers[:3])
    assert len(set(store.buffers)) <= 4


def test_a_store_that_keeps_what_it_is_given_gets_bytes() -> None:
    """A store that does not declare ``takes_part_buffers`` (a third party's) may keep
    the part it is sent: it gets ``bytes`` of its own, never a buffer filled again."""
    store = PartRecorder()
    with ThreadPoolExecutor(2) as pool, store.open_writer("o.bin", pool, part_bytes=PART) as w:
        w.write(os.urandom(2 * PART + 1))
        w.close()
    assert store.part_sizes == {1: PART, 2: PART, 3: 1}  # the assert in _mpu_put checked bytes


def test_a_plain_semaphore_still_bounds_the_parts_and_is_given_back() -> None:
    """Callers that bound their parts with a semaphore of their own keep working:
    every slot taken for a part is released once it is sent."""
    store = BufferBorrower()
    slots = threading.Semaphore(2)
    payload = os.urandom(3 * PART + 9)
    with (
        ThreadPoolExecutor(2) as pool,
        store.open_writer("o.bin", pool, part_bytes=PART, slots=slots) as w,
    ):
        w.write(payload)
        w.close()
    assert store.get_bytes("o.bin") == payload
    assert slots.acquire(blocking=False) and slots.acquire(blocking=False)
    assert not slots.acquire(blocking=False)
