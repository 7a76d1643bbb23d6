"""Packing a version's stored bytes into payload objects, uploaded as they fill.

Tensors (or their deltas) are appended one after another to a byte stream that
is cut into objects of at most ``object_bytes``; a tensor may span several
objects, which is why the manifest records a list of segments per tensor.
Parts of every object upload in parallel on a shared pool while the stream
goes on; a shared semaphore bounds the parts held in memory, so publishing
never holds a second copy of the model.

``prefix_of(n)`` names the payload prefix object n goes under (``v/p<k>/<version>/...``,
see :mod:`wanrl_s3.format.layout`; ``PublishConfig.payload_prefix`` deals consecutive
objects over consecutive prefixes), or None for the version's own directory.

Given several stores (fanout to every region), each object is opened in every
store under the same key and fed the same bytes as they stream past, so one
pass over the tensors fills every region with the same object layout, and one
manifest is valid everywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from ..format.layout import payload_key
from ..format.manifest import ObjectRef, Segment
from ..store import ObjectStore, ObjectWriter, PartSlots


class PayloadWriter:
    def __init__(
        self,
        stores: ObjectStore | Sequence[ObjectStore],
        version: int,
        publish_id: str,
        *,
        object_bytes: int,
        part_bytes: int,
        concurrency: int,
        prefix_of: Callable[[int], int | None] = lambda index: None,
    ) -> None:
        self.stores = (stores,) if isinstance(stores, ObjectStore) else tuple(stores)
        self.version, self.publish_id = version, publish_id
        self.object_bytes, self.part_bytes = object_bytes, part_bytes
        self._prefix = prefix_of
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="wanrl-put")
        self._closer = ThreadPoolExecutor(2 * len(self.stores), thread_name_prefix="wanrl-complete")
        self._slots = PartSlots(concurrency + 2)  # parts in memory, and their buffers
        # The object being filled, and every object so far: one writer per store each.
        self._writer: tuple[ObjectWriter, ...] | None = None
        self._writers: list[tuple[ObjectWriter, ...]] = []
        self._closing: list[Future[str]] = []
        self._objects: list[ObjectRef] = []
        self.bytes_written = 0

    def _relative(self, index: int) -> str:
        return f"{self.publish_id}/{index:06d}.bin"

    def _key(self, index: int) -> str:
        return payload_key(self.version, self._relative(index), self._prefix(index))

    def _current(self) -> tuple[ObjectWriter, ...]:
        if self._writer is None:
            key = self._key(len(self._writers))
            self._writer = tuple(
                store.open_writer(key, self._pool, part_bytes=self.part_bytes, slots=self._slots)
                for store in self.stores
            )
            self._writers.append(self._writer)
        return self._writer

    def _roll(self) -> None:
        """Finish the current object in the background and start a new one next time."""
        writers, self._writer = self._writer, None
        if writers is None:
            return
        index = len(self._writers) - 1
        self._objects.append(
            ObjectRef(self._relative(index), writers[0].bytes_written, self._prefix(index))
        )
        for writer in writers:
            self._close_later(writer)

    def _close_later(self, writer: ObjectWriter) -> None:
        if writer.is_multipart:  # completing waits for its parts: not on the parts' pool
            self._closing.append(self._closer.submit(writer.close))
            return
        self._slots.acquire()  # a single-PUT object holds its bytes until sent: bound them

        def put() -> str:
            try:
                return writer.close()
            finally:
                self._slots.release()

        self._closing.append(self._pool.submit(put))

    def write(self, data: memoryview) -> tuple[Segment, ...]:
        """Append bytes; return where they landed (one segment per object touched)."""
        view = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        segments: list[Segment] = []
        while len(view):
            writers = self._current()
            filled = writers[0].bytes_written
            room = self.object_bytes - filled
            piece = view[:room]
            segments.append(Segment(self._relative(len(self._writers) - 1), filled, len(piece)))
            for writer in writers:
                writer.write(piece)
            self.bytes_written += len(piece)
            view = view[room:]
            if filled + len(piece) >= self.object_bytes:
                self._roll()
        return tuple(segments)

    def close(self) -> tuple[ObjectRef, ...]:
        """Wait until every object is complete in the store; return the object list."""
        self._roll()
        for future in self._closing:
            future.result()
        self._shutdown()
        return tuple(self._objects)

    def abort(self) -> None:
        """Cancel everything in flight and remove what already landed (best effort)."""
        for future in self._closing:
            with contextlib.suppress(Exception):
                future.result()
        for writers in self._writers:
            for writer in writers:
                writer.abort()
        self._shutdown()
        self.delete_objects()

    def delete_objects(self, stores: Sequence[ObjectStore] | None = None) -> None:
        """Remove the objects written so far from ``stores`` (default: all of them)."""
        keys = [self._key(i) for i in range(len(self._writers))]
        for store in self.stores if stores is None else stores:
            with contextlib.suppress(Exception):  # leftovers are the GC's job
                store.delete(keys)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._closer.shutdown(wait=True, cancel_futures=True)
