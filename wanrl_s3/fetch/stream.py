"""Streaming a version in: each tensor is verified and decoded as soon as its bytes are in.

Downloading a version whole, every coded or delta payload into a buffer of its
own, and only then checking and decoding it would hold the whole version's
payload on top of the output. Here tensors are admitted in
the plan's order, a batch at a time, while the bytes their buffers hold (coded
full tensors, deltas, and the bounce buffer of a merged request) fit in a
window of ``window_bytes``; a batch bigger than the window is admitted alone.
The moment the last request of a tensor lands, its check and decode go on the
pool while other tensors still download; its buffers are freed and its share
of the window given back when that is done, which admits the next batch.

So the bytes held beyond the output arrays are at most
``max(window_bytes, the biggest batch)``, whatever the size of the version.
Requests that fill buffers are cut at ``window_bytes / concurrency`` (at least
1 MiB, at most ``range_bytes``), so the window still keeps every connection
busy; requests that land straight in the output keep ``range_bytes``.

A tensor whose check fails is downloaded once more before the failure stands:
a byte flipped on the way (a proxy, a NIC, a bad read) must not fail a whole
pull that a second read would serve, while damage in the store fails the
second check too. The cost of that read is only ever paid for a bad tensor.
The second read is logged at INFO, like any retry: a refusal stays one line.

Nothing is handed out here: the caller commits the outputs only after every
tensor verified. Output pages of a file map are given back once their tensor
verified (:func:`~wanrl_s3.io.pages.release`), as are a local base's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..errors import FetchCancelled, VerificationError
from ..format.manifest import Manifest, TensorEntry
from ..io.pages import discard, release, scratch
from ..io.tensors import byte_view
from ..store import ObjectStore
from ..units import MiB
from .chain import HAVE, FetchPlan, Recipe
from .download import Progress, ReadJob, Request, plan_requests, run_request

WAIT_S = 0.1  # how often the coordinator looks at ``cancel`` while nothing else happens
log = logging.getLogger(__name__)


def buffered_bytes(r: Recipe) -> int:
    """The bytes of ``r`` that need a buffer: a coded whole copy, and every delta."""
    coded = r.start is not None and r.start.encoding == "planes"
    return (r.start.stored_bytes if coded and r.start else 0) + sum(
        e.stored_bytes for _, e in r.deltas
    )


@dataclass(frozen=True)
class Batch:
    """Recipes admitted together: one big tensor, or a run of small neighbours whose
    requests merge (one round trip for a model's norm weights, not dozens)."""

    recipes: tuple[Recipe, ...]

    @property
    def cost_bytes(self) -> int:
        """Window bytes while in flight: buffers, plus the bounce buffer of merged requests."""
        held = sum(buffered_bytes(r) for r in self.recipes)
        if len(self.recipes) > 1:
            held += sum(r.download_bytes - buffered_bytes(r) for r in self.recipes)
        return held


def batches(recipes: tuple[Recipe, ...], range_bytes: int) -> list[Batch]:
    """Consecutive small recipes grouped up to ``range_bytes`` downloaded; big ones alone."""
    out: list[Batch] = []
    run: list[Recipe] = []
    run_bytes = 0
    for r in recipes:
        size = r.download_bytes
        if run and (size >= range_bytes or run_bytes + size > range_bytes):
            out.append(Batch(tuple(run)))
            run, run_bytes = [], 0
        run.append(r)
        run_bytes += size
    if run:
        out.append(Batch(tuple(run)))
    return out


@dataclass
class Tensor:
    """One recipe in flight: its output, its local base, and its payload buffers by step."""

    recipe: Recipe
    dest: np.ndarray
    base: np.ndarray | None
    buffers: dict[int, np.ndarray] = field(default_factory=dict)
    pending: int = 0  # requests not yet landed


Finish = Callable[[Tensor], None]


def _buffer(nbytes: int) -> np.ndarray:
    """A payload buffer: fresh anonymous pages, returned to the system when released."""
    return scratch((nbytes,), np.uint8)


@dataclass
class _Flight:
    """Counters the coordinator and the pool's threads share (under ``cond``)."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    active: int = 0  # submitted tasks not yet done
    held_bytes: int = 0
    peak_bytes: int = 0
    moved_bytes: int = 0
    last_byte_s: float = 0.0
    error: BaseException | None = None


class Streamer:
    """Runs one plan: admit batches into the window, download, finish each tensor early."""

    def __init__(
        self,
        store: ObjectStore,
        pool: Executor,
        finish_pool: Executor,
        plan: FetchPlan,
        *,
        range_bytes: int,
        window_bytes: int,
        concurrency: int,
        progress: Progress | None,
        cancel: threading.Event | None,
    ) -> None:
        self.store, self.pool, self.finish_pool, self.plan = store, pool, finish_pool, plan
        self.range_bytes, self.window_bytes = range_bytes, window_bytes
        self.buffer_request_bytes = min(range_bytes, max(MiB, window_bytes // concurrency))
        self.progress, self.cancel = progress, cancel
        self.flight = _Flight()

    def run(
        self, outputs: dict[str, np.ndarray], bases: dict[str, np.ndarray], finish: Finish
    ) -> _Flight:
        """Fill ``outputs``; raise the first failure (or FetchCancelled) once all work stopped."""
        queue = deque(batches(self.plan.recipes, self.range_bytes))
        fl = self.flight
        with fl.cond:
            while True:
                stopping = fl.error is not None or self._cancelled()
                while not stopping and queue and self._fits(queue[0].cost_bytes):
                    self._admit(queue.popleft(), outputs, bases, finish)
                if fl.active == 0 and (stopping or not queue):
                    break
                fl.cond.wait(WAIT_S)
        if fl.error is not None:
            raise fl.error
        if self._cancelled():
            version = self.plan.target.version
            raise FetchCancelled(f"the download of version {version} was abandoned")
        return fl

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _fits(self, cost: int) -> bool:
        held = self.flight.held_bytes
        return held == 0 or held + cost <= self.window_bytes

    def _admit(
        self,
        batch: Batch,
        outputs: dict[str, np.ndarray],
        bases: dict[str, np.ndarray],
        finish: Finish,
    ) -> None:
        """Allocate the batch's buffers and submit its requests (lock held)."""
        fl = self.flight
        fl.held_bytes += batch.cost_bytes
        fl.peak_bytes = max(fl.peak_bytes, fl.held_bytes)
        tensors = [Tensor(r, outputs[r.name], bases.get(r.name)) for r in batch.recipes]
        jobs = [job for t in tensors for job in self._jobs(t)]
        buffered = any(t.buffers for t in tensors)
        requests = plan_requests(jobs, self.buffer_request_bytes if buffered else self.range_bytes)
        for req in requests:
            for t in _owners(req):
                t.pending += 1
        left = [len(tensors)]
        for t in tensors:
            if t.pending == 0:  # nothing to download (the local copy is the target)
                self._submit(partial(self._finish, t, batch, left, finish), self.finish_pool)
        for req in requests:
            self._submit(partial(self._fetch, req, batch, left, finish))

    def _jobs(self, t: Tensor) -> Iterator[ReadJob]:
        """The reads of ``t``'s stored bytes; its buffers are made on the first call."""
        r, steps = t.recipe, self.plan.steps
        if r.start is not None:
            if r.start.encoding == "planes":
                if r.start_step not in t.buffers:
                    t.buffers[r.start_step] = _buffer(r.start.stored_bytes)
                dest = byte_view(t.buffers[r.start_step])
            else:
                dest = byte_view(t.dest)
            yield from segment_jobs(steps[r.start_step], r.start, dest, t)
        for step, entry in r.deltas:
            if step not in t.buffers:
                t.buffers[step] = _buffer(entry.stored_bytes)
            yield from segment_jobs(steps[step], entry, byte_view(t.buffers[step]), t)

    def _finish_or_reread(self, t: Tensor, finish: Finish) -> None:
        """``finish(t)``; if its check fails, read ``t``'s bytes once more and check again."""
        try:
            finish(t)
            return
        except VerificationError as exc:
            if self.flight.error is not None or self._cancelled():
                raise
            log.info("%s; reading tensor %r once more", exc, t.recipe.name)
            failure = str(exc)
        jobs = list(self._jobs(t))
        for key in sorted({job.key for job in jobs}):  # a cache's copy: from its origin now
            self.store.distrust(key, failure)
        for req in plan_requests(jobs, self.range_bytes):
            run_request(self.store, req, None)
            with self.flight.cond:
                self.flight.moved_bytes += req.length
        finish(t)  # the finish rebuilds from the stored bytes and the base: safe to repeat

    def _submit(self, task: Callable[[], None], pool: Executor | None = None) -> None:
        """Run ``task`` on ``pool``, counted in ``active`` until it has run, failed, or will
        never run: a pool shut down under the fetch (its Subscriber closed) refuses or
        cancels the task, and the coordinator must not wait for it forever (it did: a
        publisher's fetch-ahead thread then held the interpreter's exit)."""
        fl = self.flight

        def done(exc: BaseException | None = None) -> None:
            with fl.cond:
                if exc is not None:
                    fl.error = fl.error or exc
                fl.active -= 1
                fl.cond.notify_all()

        def guarded() -> None:
            try:
                if fl.error is None and not self._cancelled():
                    task()
            except BaseException as exc:
                done(exc)
            else:
                done()

        with fl.cond:
            fl.active += 1
        try:
            future = (pool or self.pool).submit(guarded)
        except RuntimeError as exc:  # "cannot schedule new futures after shutdown"
            done(self._stopped(exc))
            return
        future.add_done_callback(lambda f: done(self._stopped(None)) if f.cancelled() else None)

    def _stopped(self, cause: BaseException | None) -> FetchCancelled:
        version = self.plan.target.version
        err = FetchCancelled(f"the download of version {version} stopped: its thread pool was "
                             "shut down (the Subscriber was closed)")  # fmt: skip
        err.__cause__ = cause
        return err

    def _fetch(self, req: Request, batch: Batch, left: list[int], finish: Finish) -> None:
        run_request(self.store, req, self.progress)
        with self.flight.cond:
            self.flight.moved_bytes += req.length
            self.flight.last_byte_s = time.monotonic()
            for t in _owners(req):
                t.pending -= 1
                if t.pending == 0:  # its last byte is in: check and decode it now
                    self._submit(partial(self._finish, t, batch, left, finish), self.finish_pool)

    def _finish(self, t: Tensor, batch: Batch, left: list[int], finish: Finish) -> None:
        """Check and decode one tensor; then free its buffers and give back its pages."""
        try:
            self._finish_or_reread(t, finish)
        finally:
            for buf in t.buffers.values():
                discard(buf)
            t.buffers.clear()
        release(t.dest)
        if t.base is not None and t.recipe.start_step == HAVE:
            release(t.base)
        with self.flight.cond:
            left[0] -= 1
            if left[0] == 0:
                self.flight.held_bytes -= batch.cost_bytes


def _owners(req: Request) -> list[Tensor]:
    """The tensors a request writes into (one, or several small ones merged)."""
    found: dict[int, Tensor] = {}
    for job in req.targets:
        if isinstance(job.tag, Tensor):
            found[id(job.tag)] = job.tag
    return list(found.values())


def segment_jobs(
    m: Manifest, entry: TensorEntry | None, dest: memoryview, tag: object = None
) -> Iterator[ReadJob]:
    """The ranged reads of ``entry``'s stored bytes, in order, into ``dest``."""
    if entry is None:
        return
    pos = 0
    for seg in entry.segments:
        yield ReadJob(m.payload_key(seg.key), seg.offset, dest[pos : pos + seg.length], tag)
        pos += seg.length
