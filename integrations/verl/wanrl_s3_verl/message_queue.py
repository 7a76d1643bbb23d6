"""A staleness filter around verl's fully-async MessageQueue, without opening a sample.

verl's rollouter puts each finished sample as opaque bytes (serialized by verl) and
the trainer takes them with ``get_sample()``. The version a sample was generated
under is inside those bytes, and we never deserialize them (invariant 6). So this client
carries the version *beside* the bytes: ``put_sample`` wraps each sample with
its version before it enters verl's unmodified ``MessageQueue`` actor, and
``get_sample`` unwraps it, dropping the samples a :class:`StalenessFilter`
refuses at that moment (the final decision, taken when the learner is about to
train), so the trainer only ever sees admitted bytes, exactly as before.

Where the version comes from, in order: an explicit ``put_sample(..., version=)``;
the :func:`generating_under` context of the task that generated the sample (exact:
the version at the start of generation); otherwise the learner's version at put
time, read from the shared :mod:`~wanrl_s3_verl.clock` (which the ``wanrl_s3``
backend advances at every sync). That last one is the version the sample was
*finished* under: a sample that spans a weight sync (partial rollout) looks younger
by its span (docs/verl.md). With a store configured, a verl version tag is then
mapped to the version the rollout workers had really installed
(:class:`wanrl_s3.VersionMap`).

The learner's version at get time is the clock's, unless the owner calls
:meth:`StalenessMessageQueueClient.advance` itself.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import ray
from verl.experimental.fully_async_policy.message_queue import MessageQueueClient

from wanrl_s3 import StalenessFilter, VersionMap
from wanrl_s3.errors import UsageError

from .clock import CLOCK_NAME, find_clock
from .config import QueueSettings, true_version

log = logging.getLogger(__name__)

#: Marks a (marker, version, payload) tuple as ours inside verl's queue.
MARKER = "wanrl_s3.versioned/1"
_GENERATION_VERSION: ContextVar[int | None] = ContextVar(
    "wanrl_s3_generation_version", default=None
)


@contextlib.contextmanager
def generating_under(version: int) -> Iterator[None]:
    """Stamp every sample this task puts with ``version`` (the weights it started under)."""
    token = _GENERATION_VERSION.set(_check_version(version))
    try:
        yield
    finally:
        _GENERATION_VERSION.reset(token)


def _check_version(version: object) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise UsageError(f"a sample's version must be an integer >= 0, got {version!r}")
    return version


def wrap(version: int, payload: Any) -> tuple[str, int, Any]:
    """What travels through verl's queue: a plain tuple, so its actor needs none of our code."""
    return (MARKER, _check_version(version), payload)


def unwrap(item: Any) -> tuple[int, Any] | None:
    """(version, payload) of one of our items; None for anything else (verl's sentinel)."""
    if isinstance(item, tuple) and len(item) == 3 and item[0] == MARKER:
        return item[1], item[2]
    return None


@dataclass
class _Local:
    """Per-process state: built after unpickling, never sent between actors."""

    filter: StalenessFilter[Any]
    versions: VersionMap | None
    clock: Any | None
    explicit_learner: bool = False
    decisions: int = 0


_DROPPED = object()


class StalenessMessageQueueClient(MessageQueueClient):
    """verl's ``MessageQueueClient`` with version stamps on put and a staleness filter on get.

    A drop-in: same actor, same methods, same return values; ``get_sample`` just
    never returns a sample the filter refuses. Install it with
    :mod:`wanrl_s3_verl.fully_async_main`, or by handing it to the rollouter and
    trainer with their ``set_message_queue_client``.
    """

    def __init__(
        self,
        queue_actor: Any,
        settings: QueueSettings | Mapping[str, Any] | None = None,
        *,
        clock_name: str = CLOCK_NAME,
        log_every: int = 1000,
    ) -> None:
        super().__init__(queue_actor)
        self.settings = (
            settings
            if isinstance(settings, QueueSettings)
            else QueueSettings.from_mapping(settings)
        )
        self.clock_name = clock_name
        self.log_every = log_every
        self._local: _Local | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_local"] = None  # a lock and threads: rebuilt in each process
        return state

    @property
    def local(self) -> _Local:
        if self._local is None:
            s = self.settings
            self._local = _Local(
                s.staleness_filter("queue"), s.version_map(), find_clock(self.clock_name)
            )
        return self._local

    # -- producer side --------------------------------------------------------------------
    async def put_sample(self, sample: Any, version: int | None = None) -> bool:
        """Put ``sample`` with its version; ``None`` (end of stream) goes through untouched."""
        if sample is None:
            return await super().put_sample(sample)
        return await super().put_sample(wrap(await self._stamp(version), sample))

    async def _stamp(self, version: int | None) -> int:
        if version is not None:
            return _check_version(version)
        context = _GENERATION_VERSION.get()
        if context is not None:
            return context
        clock = self._clock()
        if clock is None:
            raise UsageError(
                "put_sample needs the version the sample was generated under: pass version=, "
                "wrap generation in generating_under(version), or run with the version clock "
                "(python -m wanrl_s3_verl.fully_async_main creates it)"
            )
        return int(await clock.read.remote())

    # -- consumer side --------------------------------------------------------------------
    def advance(self, learner_version: int) -> None:
        """Set the learner's version by hand (from now on the clock is not read)."""
        local = self.local
        local.explicit_learner = True
        if learner_version > local.filter.learner_version:
            local.filter.advance(learner_version)

    async def get_sample(self) -> Any | None:
        """The next admitted ``(sample, remaining)``; stale samples are dropped on the way."""
        while True:
            got = await super().get_sample()
            learner = await self._clock_version()
            judged = self._judge(got, learner)
            if judged is not _DROPPED:
                return judged

    def get_sample_sync(self) -> Any | None:
        while True:
            got = super().get_sample_sync()
            clock = self._learner_clock()
            judged = self._judge(got, None if clock is None else int(ray.get(clock.read.remote())))
            if judged is not _DROPPED:
                return judged

    def _clock(self) -> Any | None:
        """The shared clock; looked up again while missing (it may be created later)."""
        local = self.local
        if local.clock is None:
            local.clock = find_clock(self.clock_name)
        return local.clock

    def _learner_clock(self) -> Any | None:
        return None if self.local.explicit_learner else self._clock()

    async def _clock_version(self) -> int | None:
        clock = self._learner_clock()
        return None if clock is None else int(await clock.read.remote())

    def _judge(self, got: Any, learner: int | None) -> Any:
        """``got`` unwrapped if admitted (or not ours), else _DROPPED."""
        if got is None:
            return None
        item, remaining = got
        ours = unwrap(item)
        if ours is None:
            return got  # verl's end-of-stream None, or a sample put by a plain client
        local = self.local
        if learner is not None and learner > local.filter.learner_version:
            local.filter.advance(learner)
        tag, payload = ours
        version = true_version(local.versions, tag)
        admitted = local.filter.offer(payload, version=version, at_get=True)
        local.decisions += 1
        if self.log_every and local.decisions % self.log_every == 0:
            log.info("wanrl_s3 queue filter: %s", self.staleness_metrics(reset=False))
        return (payload, remaining) if admitted else _DROPPED

    def staleness_metrics(self, *, reset: bool = False) -> dict[str, float]:
        """The filter's counters under ``staleness/...`` (this process's decisions)."""
        return self.local.filter.snapshot(reset=reset)

    async def get_statistics(self) -> dict[str, Any]:
        """verl's queue statistics plus this client's staleness counters."""
        return {**await super().get_statistics(), **self.staleness_metrics()}
