"""Bounded-staleness admission around any queue of version-tagged items.

The learner accepts a trajectory generated under policy version ``v`` while it
is itself at version ``v_t`` only if ``v >= v_t - S``; it publishes a snapshot
every ``kappa = S - 1`` steps, and ``S >= 3`` (``kappa >= 2``) is the smallest
budget the published rule uses (reference page, "What it is"). A trajectory
that spans a weight switch counts by its *oldest* version: its first tokens
were sampled under that policy, so that is how stale it is.

:class:`StalenessFilter` is trainer-agnostic: it wraps anything with
``put``/``get`` (``queue.Queue``...) or a plain callable sink, and it also
offers the bare decisions (:meth:`~StalenessFilter.check_in`,
:meth:`~StalenessFilter.check_out`, :meth:`~StalenessFilter.offer`) for
integrations that own their storage (verl's replay buffer, its async
MessageQueue). It imports none of verl, ray or torch.

Where items are dropped (a choice, documented here once):

* at ``put`` when an item is already too old on arrival: it never takes a slot;
* again at ``get``, because the learner may advance while an item waits in the
  queue. An item fresh when queued but older than ``v_t - S`` by the time it
  is taken is dropped then, so the consumer never trains on it. The age
  histogram records the age at that final decision, the one that matters.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from .errors import UsageError
from .units import require_int

T = TypeVar("T")

#: Smallest staleness budget of the published rule: kappa = S - 1 >= 2.
MIN_STALENESS = 3
#: Largest budget inside the measured stability envelope (reward within ~5% of sync).
MAX_STABLE_STALENESS = 6
#: Smallest budget accepted even with ``force``: kappa = S - 1 must stay >= 1.
MIN_FORCED_STALENESS = 2

#: Where the rule and the envelope come from, quoted in messages.
REFERENCE_PAGE = "docs/sizing-and-cost.md, 'When the plan is infeasible'"

#: Metric names, stable across runs (dashboards and verl's metrics key on them).
METRIC_PREFIX = "staleness/"


class StalenessEnvelopeWarning(UserWarning):
    """S is usable but outside the measured stability envelope S <= 6."""


@runtime_checkable
class QueueLike(Protocol):
    """What :class:`StalenessFilter` needs from a queue: ``queue.Queue`` has it."""

    def put(self, item: Any, *args: Any, **kwargs: Any) -> Any: ...

    def get(self, *args: Any, **kwargs: Any) -> Any: ...


# --- pure helpers, shared with the planner ------------------------------------------------


def kappa_for_staleness(staleness: int) -> int:
    """Publication interval for a budget: ``kappa = S - 1`` (at least 1)."""
    return require_int("staleness", staleness, MIN_FORCED_STALENESS) - 1


def staleness_for_kappa(kappa: int) -> int:
    """Budget for a publication interval: ``S = kappa + 1``."""
    return require_int("kappa", kappa, MIN_FORCED_STALENESS - 1) + 1


def stability_warning(staleness: int) -> str | None:
    """The envelope warning for ``S``, or None inside it. Pure: the caller decides to emit it."""
    if staleness <= MAX_STABLE_STALENESS:
        return None
    return (
        f"staleness {staleness} is outside the measured stable envelope S <= "
        f"{MAX_STABLE_STALENESS} (standard GRPO stayed within ~5% of synchronous up to S = 6 "
        f"and diverged at S = 11; see {REFERENCE_PAGE}); validate the objective before a long run"
    )


def check_staleness(staleness: int, *, force: bool, fix: str = "pass force=True") -> int:
    """The S >= 3 rule (kappa = S - 1 >= 2), shared by the filter and the planner.

    ``fix`` names how the caller overrides it (an argument here, a flag in the CLI).
    """
    staleness = require_int("staleness", staleness, MIN_FORCED_STALENESS)
    if staleness < MIN_STALENESS and not force:
        raise UsageError(
            f"staleness {staleness} gives kappa {staleness - 1} < 2; the published rule "
            f"needs S >= {MIN_STALENESS} (kappa >= 2, {REFERENCE_PAGE}); {fix} to run it anyway"
        )
    return staleness


def is_admissible(version: int, learner_version: int, staleness: int) -> bool:
    """The admission rule itself: ``v >= v_t - S``."""
    return version >= learner_version - staleness


def oldest_version(tag: int | Sequence[int]) -> int:
    """A version tag as one integer: itself, or the oldest of a trajectory's versions."""
    if type(tag) is int and tag >= 0:  # the common case, ahead of the general checks
        return tag
    if isinstance(tag, int) and not isinstance(tag, bool):
        return require_int("version", tag, 0)
    if isinstance(tag, Sequence) and not isinstance(tag, (str, bytes)):
        if not tag:
            raise UsageError("version sequence is empty; tag the item with the versions it used")
        return min(require_int("version", v, 0) for v in tag)
    raise UsageError(
        f"version tag must be an int or a sequence of ints, got {type(tag).__name__}: {tag!r}"
    )


_VERSION_KEYS = ("min_version", "versions", "version")
_MISSING = object()


def default_version_of(item: object) -> int | Sequence[int]:
    """Find an item's tag: ``min_version``, ``versions`` or ``version`` (key or attribute).

    Anything else needs an explicit ``version_of`` (verl's trajectory tags, for
    instance, carry ``min_global_steps``).
    """
    if type(item) is Tagged:  # the common case: one attribute, no lookups
        return item.version
    if isinstance(item, Mapping):
        for key in _VERSION_KEYS:
            if key in item:
                return item[key]  # type: ignore[no-any-return]
    else:
        for key in _VERSION_KEYS:
            value = getattr(item, key, _MISSING)
            if value is not _MISSING:
                return value  # type: ignore[return-value]
    raise UsageError(
        f"cannot find a version on {type(item).__name__}: give it one of {_VERSION_KEYS} "
        "(key or attribute) or pass version_of= to StalenessFilter"
    )


@dataclass(frozen=True, slots=True)
class Tagged(Generic[T]):
    """A payload with the version(s) it was generated under; the simplest tagged item."""

    payload: T
    version: int | tuple[int, ...]


# --- configuration -------------------------------------------------------------------------


@dataclass(frozen=True)
class StalenessConfig:
    """The budget S and the publication interval kappa = S - 1 derived from it.

    ``S < 3`` is refused unless ``force`` (the rule needs kappa >= 2); ``S > 6``
    builds but warns with :class:`StalenessEnvelopeWarning`, because the run may
    still be right for an objective that corrects for stale data.
    """

    staleness: int = MIN_STALENESS
    force: bool = False
    kappa: int = field(init=False)

    def __post_init__(self) -> None:
        staleness = check_staleness(self.staleness, force=self.force)
        warning = stability_warning(staleness)
        if warning is not None:
            warnings.warn(warning, StalenessEnvelopeWarning, stacklevel=3)
        object.__setattr__(self, "kappa", kappa_for_staleness(staleness))

    @classmethod
    def from_kappa(cls, kappa: int, *, force: bool = False) -> StalenessConfig:
        """The same budget named by its publication interval."""
        return cls(staleness=staleness_for_kappa(kappa), force=force)


# --- the filter ----------------------------------------------------------------------------


class StalenessFilter(Generic[T]):
    """Admit ``v >= v_t - S`` around a queue, a callable sink, or nothing (decisions only).

    Thread-safe: every decision and counter update happens under one lock; the
    sink's own ``put``/``get`` run outside it, so a blocking ``get`` never holds
    up producers. ``sentinel`` items (default ``None``, the end-of-stream marker
    of ``queue.Queue`` consumers and verl's MessageQueue) pass through uncounted.

    Counters (see :meth:`snapshot`): ``generated`` items offered; ``admitted``
    handed to the consumer; ``dropped`` refused (``dropped_at_put`` +
    ``dropped_at_get``); ``pending`` queued but not yet taken. Always
    ``generated == admitted + dropped + pending`` between resets.
    """

    def __init__(
        self,
        config: StalenessConfig,
        sink: QueueLike | Callable[[T], object] | None = None,
        *,
        learner_version: int = 0,
        version_of: Callable[[T], int | Sequence[int]] = default_version_of,
        sentinel: object = None,
    ) -> None:
        if not isinstance(config, StalenessConfig):
            raise UsageError(f"config must be a StalenessConfig, got {type(config).__name__}")
        if sink is not None and not hasattr(sink, "put") and not callable(sink):
            raise UsageError(
                f"sink must have put()/get() (a queue) or be callable, got {type(sink).__name__}"
            )
        self.config = config
        self._budget = config.staleness  # read per item: one attribute, not two
        # resolved once: put() and get() run per item and must not re-inspect the sink
        self._queue: QueueLike | None = sink if hasattr(sink, "put") else None  # type: ignore[assignment]
        self._call: Callable[[T], object] | None = (
            sink if sink is not None and self._queue is None else None  # type: ignore[assignment]
        )
        self._version_of = version_of
        self._sentinel = sentinel
        self._lock = threading.Lock()
        self._learner_version = require_int("learner_version", learner_version, 0)
        self._carried = dict.fromkeys(_TOTALS, 0)  # counts before the last reset (totals())
        self._reset_counters()
        self._pending = 0

    # -- state ---------------------------------------------------------------------------

    def _reset_counters(self) -> None:
        self._generated = 0
        self._admitted = 0
        self._dropped_at_put = 0
        self._dropped_at_get = 0
        self._ahead = 0
        self._age_sum = 0
        # ages 0..S, then one bucket for every drop (age > S)
        self._hist = [0] * (self.config.staleness + 2)

    @property
    def staleness(self) -> int:
        """The budget S: an item ``v`` is admitted while the learner is at ``v + S`` or before."""
        return self.config.staleness

    @property
    def learner_version(self) -> int:
        """The learner's version, as :meth:`advance` last set it."""
        with self._lock:
            return self._learner_version

    def advance(self, learner_version: int) -> None:
        """Move the learner to ``learner_version``; it never moves backwards."""
        require_int("learner_version", learner_version, 0)
        with self._lock:
            if learner_version < self._learner_version:
                raise UsageError(
                    f"learner_version went backwards: {learner_version} < "
                    f"{self._learner_version}; versions only grow (start a new filter on restart)"
                )
            self._learner_version = learner_version

    def age_of(self, item: T, *, version: int | Sequence[int] | None = None) -> int:
        """``v_t - v`` for an item right now (negative: tagged ahead of the learner)."""
        oldest = self._oldest(item, version)
        with self._lock:
            return self._learner_version - oldest

    def _oldest(self, item: T, version: int | Sequence[int] | None) -> int:
        tag = self._version_of(item) if version is None else version
        return tag if type(tag) is int and tag >= 0 else oldest_version(tag)

    def _drop(self, *, at_get: bool) -> bool:
        """Count one drop; caller holds the lock."""
        if at_get:
            self._dropped_at_get += 1
        else:
            self._dropped_at_put += 1
        self._hist[-1] += 1
        return False

    def _decide(self, age: int, *, at_get: bool) -> bool:
        """The final decision at ``age``; caller holds the lock. Negative ages land in bucket 0."""
        if age > self._budget:
            return self._drop(at_get=at_get)
        self._admitted += 1
        if age < 0:
            self._ahead += 1
            age = 0
        self._age_sum += age
        self._hist[age] += 1
        return True

    # -- bare decisions (no sink) ----------------------------------------------------------

    def offer(
        self, item: T, *, version: int | Sequence[int] | None = None, at_get: bool = False
    ) -> bool:
        """One final decision for an item (callable sinks, replay buffers): admit or drop.

        ``at_get``: the decision is made where items are taken (a consumer-side
        adapter), so a drop counts as ``dropped_at_get``.
        """
        oldest = self._oldest(item, version)
        with self._lock:
            self._generated += 1
            return self._decide(self._learner_version - oldest, at_get=at_get)

    def check_in(self, item: T, *, version: int | Sequence[int] | None = None) -> bool:
        """Producer side of a queue: False (dropped) if already too old, else pending."""
        oldest = self._oldest(item, version)
        with self._lock:
            self._generated += 1
            if self._learner_version - oldest > self._budget:
                return self._drop(at_get=False)
            self._pending += 1
            return True

    def check_out(self, item: T, *, version: int | Sequence[int] | None = None) -> bool:
        """Consumer side: the final decision for an item that passed :meth:`check_in`."""
        oldest = self._oldest(item, version)
        with self._lock:
            if self._pending:  # a check_out without check_in must not go negative
                self._pending -= 1
            return self._decide(self._learner_version - oldest, at_get=True)

    def _undo_check_in(self) -> None:
        """The sink refused an item check_in already counted (queue.Full...)."""
        with self._lock:
            self._generated -= 1
            self._pending = max(self._pending - 1, 0)

    def select(self, items: Iterable[T]) -> list[T]:
        """The admitted subset of ``items``, each decided once with :meth:`offer`."""
        return [item for item in items if self.offer(item)]

    # -- the wrapped sink ---------------------------------------------------------------------

    def put(self, item: T, *args: Any, **kwargs: Any) -> bool:
        """Offer an item; True if it went on to the sink. Extra arguments go to ``sink.put``."""
        q = self._queue
        if q is None:
            call = self._call
            if call is None:
                raise UsageError("this StalenessFilter has no sink; use offer() or check_in()")
            if item is self._sentinel or self.offer(item):  # a callable sink: final here
                call(item)
                return True
            return False
        counted = item is not self._sentinel
        if counted and not self.check_in(item):
            return False
        try:
            q.put(item, *args, **kwargs)
        except BaseException:
            if counted:
                self._undo_check_in()
            raise
        return True

    def get(self, *args: Any, **kwargs: Any) -> T:
        """The next admitted item; stale ones met on the way are dropped (and ``task_done``).

        Arguments go to ``sink.get`` for every item taken, so a ``timeout`` bounds
        each wait, not their sum; ``queue.Empty`` propagates as usual.
        """
        q = self._queue
        if q is None:
            raise UsageError("get() needs a queue sink (an object with get()); this one has none")
        while True:
            item: T = q.get(*args, **kwargs)
            if item is self._sentinel or self.check_out(item):
                return item
            task_done = getattr(q, "task_done", None)
            if task_done is not None:  # the consumer never sees it, so join() would hang
                task_done()

    # -- metrics --------------------------------------------------------------------------

    def snapshot(self, *, reset: bool = False) -> dict[str, float]:
        """Counters under stable names, ready for a metrics logger (verl's included).

        ``admit_ratio`` is admitted / (admitted + dropped), 1.0 before any decision;
        ``age_mean`` is over admitted items. ``reset=True`` zeroes the counters
        after reading them (per-step windows); ``pending`` is a live gauge and is
        kept, so the sum identity holds only from the start. ``age_hist/<k>`` for
        k = 0..S counts admissions by age, ``age_hist/over`` counts every drop.
        """
        with self._lock:
            dropped = self._dropped_at_put + self._dropped_at_get
            decided = self._admitted + dropped
            out: dict[str, float] = {
                "generated": self._generated,
                "admitted": self._admitted,
                "dropped": dropped,
                "dropped_at_put": self._dropped_at_put,
                "dropped_at_get": self._dropped_at_get,
                "pending": self._pending,
                "ahead": self._ahead,
                "admit_ratio": self._admitted / decided if decided else 1.0,
                "age_mean": self._age_sum / self._admitted if self._admitted else 0.0,
                "learner_version": self._learner_version,
                "budget": self.config.staleness,
                "kappa": self.config.kappa,
            }
            for age, count in enumerate(self._hist[:-1]):
                out[f"age_hist/{age}"] = count
            out["age_hist/over"] = self._hist[-1]
            if reset:
                for key in _TOTALS:
                    self._carried[key] += getattr(self, f"_{key}")
                self._reset_counters()
        return {METRIC_PREFIX + key: value for key, value in out.items()}

    def totals(self) -> dict[str, int]:
        """Counts since the filter was made, whatever :meth:`snapshot` reset (for counters
        that only grow, such as Prometheus's): ``generated``, ``admitted``,
        ``dropped_at_put``, ``dropped_at_get``, and the live ``pending``."""
        with self._lock:
            out = {key: self._carried[key] + getattr(self, f"_{key}") for key in _TOTALS}
            out["pending"] = self._pending
        return out


_TOTALS = ("generated", "admitted", "dropped_at_put", "dropped_at_get")


__all__ = [
    "MAX_STABLE_STALENESS",
    "METRIC_PREFIX",
    "MIN_FORCED_STALENESS",
    "MIN_STALENESS",
    "REFERENCE_PAGE",
    "QueueLike",
    "StalenessConfig",
    "StalenessEnvelopeWarning",
    "StalenessFilter",
    "Tagged",
    "default_version_of",
    "is_admissible",
    "kappa_for_staleness",
    "oldest_version",
    "stability_warning",
    "staleness_for_kappa",
]
