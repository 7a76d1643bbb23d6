"""Whether a store holds a version's payload exactly as its manifest says, without decoding it.

A copy of a version (the relay's, in a replica) is only as good as its bytes:
a payload object flipped, replaced or truncated where it was copied from is
copied faithfully. :func:`check_stored` reads the copy back and checks every
object's size and every tensor's ``stored_hash`` (the BLAKE3 of its stored
bytes, which the manifest's signature and digest cover), so what it passes is
what a reader of that store will verify. No base is needed: deltas are checked
as stored, not applied.

Small tensors are read a batch at a time, adjacent ranges merged into one GET
(:func:`~wanrl_s3.fetch.download.plan_requests`); a big one is hashed as it
streams in, ``chunk_bytes`` at a time. Memory: one batch or chunk per task in
flight on the caller's executor.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor

from ..errors import VerificationError
from ..format import hashing
from ..format.listing import Listings
from ..format.manifest import Manifest, TensorEntry
from ..store import ObjectStore
from .download import ReadJob, Request, plan_requests, run_request, wait_all


def check_stored(
    store: ObjectStore, manifest: Manifest, executor: Executor, *, chunk_bytes: int
) -> None:
    """Refuse (VerificationError naming the object or tensor) unless every payload object of
    ``manifest`` has its size in ``store`` and every tensor's stored bytes hash right."""
    check_sizes(store, manifest)
    tasks = [
        executor.submit(_check_batch, store, manifest, batch, chunk_bytes)
        if len(batch) > 1 or batch[0].stored_bytes <= chunk_bytes
        else executor.submit(_check_big, store, manifest, batch[0], chunk_bytes)
        for batch in _batches(manifest.tensors, chunk_bytes)
    ]
    wait_all(tasks)


def check_sizes(store: ObjectStore, manifest: Manifest) -> None:
    """Refuse unless every payload object of ``manifest`` is in ``store`` at its size (one LIST
    per directory its objects lie in: the version's, and each payload prefix's)."""
    held = Listings(store)
    for o in manifest.objects:
        size = held.size(manifest.payload_key(o.key))
        if size != o.size:
            raise VerificationError(
                f"payload object {o.key} of v{manifest.version} at {store.url} "
                + ("is missing" if size is None else f"holds {size} bytes, not {o.size}")
            )


def _batches(tensors: tuple[TensorEntry, ...], chunk_bytes: int) -> Iterator[list[TensorEntry]]:
    """Consecutive small tensors up to ``chunk_bytes`` together; a big one alone."""
    batch: list[TensorEntry] = []
    held = 0
    for t in tensors:
        if batch and held + t.stored_bytes > chunk_bytes:
            yield batch
            batch, held = [], 0
        batch.append(t)
        held += t.stored_bytes
    if batch:
        yield batch


def _check_batch(
    store: ObjectStore, manifest: Manifest, batch: list[TensorEntry], chunk_bytes: int
) -> None:
    """Read the batch's segments (merged where adjacent), then hash each tensor."""
    bufs = {t.name: bytearray(t.stored_bytes) for t in batch}
    jobs = []
    for t in batch:
        at = 0
        for s in t.segments:
            dest = memoryview(bufs[t.name])[at : at + s.length]
            jobs.append(ReadJob(manifest.payload_key(s.key), s.offset, dest))
            at += s.length
    for req in plan_requests(jobs, chunk_bytes):
        run_request(store, req, None)
    for t in batch:
        _compare(store, manifest, t, hashing.digest(bufs[t.name]))


def _check_big(store: ObjectStore, manifest: Manifest, t: TensorEntry, chunk_bytes: int) -> None:
    """Hash one big tensor as it streams in, a chunk at a time."""
    hasher = hashing.Hasher()
    buf = memoryview(bytearray(chunk_bytes))
    for s in t.segments:
        for lo in range(0, s.length, chunk_bytes):
            piece = buf[: min(chunk_bytes, s.length - lo)]
            key, offset = manifest.payload_key(s.key), s.offset + lo
            job = ReadJob(key, offset, piece)
            run_request(store, Request(key, offset, len(piece), (job,)), None)
            hasher.update(piece)
    _compare(store, manifest, t, hasher.hexdigest())


def _compare(store: ObjectStore, manifest: Manifest, t: TensorEntry, got: str) -> None:
    if got != (t.stored_hash or t.hash):
        raise VerificationError(
            f"tensor {t.name!r} of v{manifest.version} at {store.url} does not hash to its "
            "manifest's stored_hash: its payload is damaged"
        )


__all__ = ["check_sizes", "check_stored"]
