"""Parallel ranged GETs straight into their destination buffers.

Work arrives as (key, offset, destination) jobs. Jobs bigger than
``range_bytes`` are split so that large tensors download over many connections
at once, each piece landing directly in its slice of the tensor's buffer;
neighbouring small jobs in the same object are merged into one request (one
round trip instead of dozens for a model's norm weights) and scattered after.
A dropped connection resumes at the last byte received (the store's
``read_into``). :mod:`wanrl_s3.fetch.stream` runs the requests and verifies each
tensor as soon as its requests have landed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from ..errors import NotFoundError, VerificationError
from ..store import ObjectStore

Progress = Callable[[int], None]
T = TypeVar("T")


@dataclass(frozen=True)
class ReadJob:
    key: str
    offset: int
    dest: memoryview  # exactly the bytes wanted; len(dest) bytes from offset
    tag: object = None  # the caller's: which tensor the bytes are for (kept by split pieces)


@dataclass(frozen=True)
class Request:
    key: str
    offset: int
    length: int
    targets: tuple[ReadJob, ...]  # one job read in place, or several to scatter


def plan_requests(jobs: Iterable[ReadJob], range_bytes: int) -> list[Request]:
    """Split big jobs, merge adjacent small ones; pure, so it is tested on its own."""
    requests: list[Request] = []
    pending: list[ReadJob] = []

    def flush() -> None:
        if pending:
            start = pending[0].offset
            end = pending[-1].offset + len(pending[-1].dest)
            requests.append(Request(pending[0].key, start, end - start, tuple(pending)))
            pending.clear()

    for job in sorted(jobs, key=lambda j: (j.key, j.offset)):
        size = len(job.dest)
        if size == 0:
            continue
        if size >= range_bytes:
            flush()
            for lo in range(0, size, range_bytes):
                piece = ReadJob(job.key, job.offset + lo, job.dest[lo : lo + range_bytes], job.tag)
                requests.append(Request(job.key, piece.offset, len(piece.dest), (piece,)))
            continue
        if pending and (
            pending[-1].key != job.key
            or pending[-1].offset + len(pending[-1].dest) != job.offset
            or job.offset + size - pending[0].offset > range_bytes
        ):
            flush()
        pending.append(job)
    flush()
    return requests


def run_request(store: ObjectStore, req: Request, progress: Progress | None) -> None:
    """One ranged GET into its job's buffer, or into a bounce buffer scattered to several."""
    if len(req.targets) == 1:
        _read(store, req.key, req.offset, req.targets[0].dest)
    else:
        buf = bytearray(req.length)
        _read(store, req.key, req.offset, memoryview(buf))
        for job in req.targets:
            lo = job.offset - req.offset
            job.dest[:] = buf[lo : lo + len(job.dest)]
    if progress is not None:
        progress(req.length)


def _read(store: ObjectStore, key: str, offset: int, dest: memoryview) -> None:
    """``store.read_into``, where a missing object is damage to the version that names it.

    Only committed manifests send readers here, so the object's absence is not a
    bad request (exit 2) but a damaged version (deleted by hand, collected too
    early): a :class:`VerificationError`, like a truncated object.
    """
    try:
        store.read_into(key, offset, dest)
    except NotFoundError as exc:
        raise VerificationError(
            f"payload object {key} is missing from {store.url}: the version is damaged"
        ) from exc


def wait_all(futures: Sequence[Future[T]]) -> list[T]:
    """Every result, in order; the first failure cancels what has not started, and is
    raised once the rest have finished, so no request outlives the call."""
    results: list[T] = []
    error: BaseException | None = None
    for f in futures:
        try:
            results.append(f.result())
        except BaseException as exc:  # keep draining
            if error is None:
                error = exc
                for other in futures:
                    other.cancel()
    if error is not None:
        raise error
    return results
