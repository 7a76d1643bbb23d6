"""What a trainer's step tag really means: the policy version the rollout workers held.

A trainer stamps every trajectory with the step of its last weight sync (verl's
``global_steps``, as ``min_global_steps``/``max_global_steps``), whatever each
rollout worker installed at that sync. A worker installs the newest version it
has *ready* and never waits for a download, so after sync ``g`` it may still hold
version ``g - 2``, or nothing new at all when the trainer publishes only every
kappa syncs. Taken at face value, the tag would under-state staleness by that gap
(the version hazard, docs/verl.md).

So each rollout worker records, in its status object in the bucket, the map
``step -> installed version`` (:class:`StepStatusWriter`), and the learner's
staleness filters translate a tag through :class:`VersionMap`: the *oldest*
version any rollout worker held at that step. A trajectory cannot say which
worker generated it, so the oldest is the only choice that never admits a
trajectory older than the budget.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from ..errors import UsageError, WanrlError
from ..fetch.watch import InstallResult
from ..store import ObjectStore
from .status import StatusReporter, WorkerStatus, read_statuses

log = logging.getLogger(__name__)

#: The extra field of a rollout worker's status object.
STEPS_FIELD = "steps"
#: How many syncs each status object remembers (a few bytes each).
STEPS_KEPT = 1024


class StepStatusWriter:
    """A rollout worker's status object: the worker-status format plus ``steps``.

    ``steps`` maps each trainer step this worker synced at to the version it held
    afterwards (``null``: none yet), written as the reporter's ``extra`` field.
    The fleet's readers (``wanrl-s3 status``) read the rest as usual. Writes go out
    in order on one background thread, so a slow PUT never lengthens the trainer's
    weight-sync pause.
    """

    def __init__(
        self, store: ObjectStore, worker_id: str, *, region: str = "", kept: int = STEPS_KEPT
    ) -> None:
        self.reporter = StatusReporter(store, worker_id, region)  # checks the id
        self.steps: dict[int, int | None] = {}
        self._kept = kept
        self._lock = threading.Lock()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="wanrl-status")
        self._last: Future[None] | None = None

    def synced(
        self, step: int, version: int | None, installed: InstallResult | None = None
    ) -> Future[None]:
        """Record that after sync ``step`` this worker holds ``version``."""
        with self._lock:
            self.steps[step] = version
            while len(self.steps) > self._kept:
                del self.steps[min(self.steps)]
            extra = {STEPS_FIELD: {str(k): v for k, v in sorted(self.steps.items())}}
            if installed is None:
                return self._submit(partial(self.reporter.annotate, extra))
            return self._submit(partial(self.reporter.installed, installed, extra=extra))

    def error(self, message: str) -> Future[None]:
        """Queue a write showing ``message`` as the worker's last error; the future ends with it."""
        with self._lock:
            return self._submit(partial(self.reporter.error, message))

    def _submit(self, write: Callable[[], None]) -> Future[None]:
        """Queue one write of the reporter; caller holds the lock, so writes keep their order."""
        self._last = self._writer.submit(self._put, write)
        return self._last

    def _put(self, write: Callable[[], None]) -> None:
        try:
            write()
        except WanrlError as exc:  # the next sync writes again; training must go on
            log.warning("could not write the status object %s: %s", self.reporter.key, exc)

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every queued write has been attempted."""
        last = self._last
        if last is not None:
            last.result(timeout_s)

    def close(self) -> None:
        """Stop the writer thread once the queued writes are attempted."""
        self._writer.shutdown(wait=True)


@dataclass(frozen=True)
class WorkerSteps:
    worker_id: str
    steps: Mapping[int, int | None]


def worker_steps(status: WorkerStatus) -> WorkerSteps | None:
    """The steps map of one worker, or None: a plain ``wanrl-s3 worker``, or a malformed map."""
    raw = status.extra.get(STEPS_FIELD)
    if not isinstance(raw, Mapping):
        return None
    try:
        steps = {int(k): None if v is None else int(v) for k, v in raw.items()}
    except (ValueError, TypeError):
        return None
    return WorkerSteps(status.worker_id, steps)


class VersionMap:
    """``step`` -> the oldest policy version any rollout worker held at that step.

    Built from the status objects of the rollout workers (those with a ``steps``
    map and an id starting with ``worker_prefix``) in every store given (each
    region's workers report to their own region), re-read at most every
    ``refresh_s`` seconds, and sooner (at most once a second) when asked about a
    step it has not seen yet. For a step no worker recorded, the newest recorded
    step before it stands in (versions only grow, so that is older, never newer);
    with no record at all the answer is 0, the oldest possible version, and a
    warning says so: a filter must never admit what it cannot place.
    """

    def __init__(
        self,
        stores: ObjectStore | Sequence[ObjectStore],
        *,
        worker_prefix: str = "",
        refresh_s: float = 5.0,
        min_refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if refresh_s < 0 or min_refresh_s < 0:
            raise UsageError("refresh_s and min_refresh_s must be >= 0")
        self.stores = (stores,) if isinstance(stores, ObjectStore) else tuple(stores)
        if not self.stores:
            raise UsageError("a VersionMap needs at least one store")
        self.worker_prefix = worker_prefix
        self.refresh_s = refresh_s
        self.min_refresh_s = min_refresh_s
        self._clock = clock
        self._workers: list[WorkerSteps] = []
        self._newest_step: int | None = None
        self._read_at: float | None = None
        self._cache: dict[int, int] = {}
        self._lock = threading.Lock()
        self._warned = False

    @property
    def workers(self) -> tuple[WorkerSteps, ...]:
        """Each worker's steps as the last :meth:`refresh` read them."""
        return tuple(self._workers)

    def refresh(self) -> None:
        """Re-read every rollout worker's status object now."""
        statuses = [
            status
            for store in self.stores
            for status in read_statuses(store, worker_prefix=self.worker_prefix)
        ]
        workers = [w for w in map(worker_steps, statuses) if w is not None]
        with self._lock:
            self._workers = workers
            self._newest_step = max((s for w in workers for s in w.steps), default=None)
            self._read_at = self._clock()
            self._cache.clear()

    def true_version(self, step: int) -> int:
        """The oldest version a rollout worker held after the sync tagged ``step``."""
        self._maybe_refresh(step)
        with self._lock:
            cached = self._cache.get(step)
            if cached is None:
                cached = self._cache[step] = self._lookup(step)
            return cached

    def _maybe_refresh(self, step: int) -> None:
        read_at = self._read_at
        if read_at is None:
            self.refresh()
            return
        age_s = self._clock() - read_at
        unseen = self._newest_step is None or step > self._newest_step
        if age_s >= self.refresh_s or (unseen and age_s >= self.min_refresh_s):
            self.refresh()

    def _lookup(self, step: int) -> int:
        """The rule of the class docstring; caller holds the lock."""
        exact = [w.steps[step] for w in self._workers if step in w.steps]
        if exact:
            return min(0 if v is None else v for v in exact)
        before = []
        for w in self._workers:
            earlier = [s for s in w.steps if s < step]
            if earlier:
                v = w.steps[max(earlier)]
                before.append(0 if v is None else v)
        if before:
            return min(before)
        if not self._warned:
            self._warned = True
            log.warning(
                "no rollout worker has recorded what it held at step %d (nor before) "
                "in the worker status objects of %s: counting such trajectories as "
                "version 0. Do the rollout workers record their steps (StepStatusWriter) "
                "in this store?",
                step,
                ", ".join(store.url for store in self.stores),
            )
        return 0
