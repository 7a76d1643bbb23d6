"""Retries for transient store failures, and the one backoff of the package, on an injectable clock.

The s3 backend maps its library's connection resets, timeouts and 5xx answers to
:class:`~wanrl_s3.errors.TransientStoreError`, and a store's "slow down" (S3's 503
SlowDown, a 429) to its subclass :class:`~wanrl_s3.errors.ThrottledError`;
everything built on the store primitives retries those (and only those) here, with
capped exponential backoff and full jitter. A throttled request has a budget of
its own, longer and more patient (as s3transfer and botocore treat throttling
apart): the store is not failing, it is over its request rate, and a request that
gives up fails the whole download it belongs to, which a worker then starts over
(at 10,000 workers on one prefix, docs/scale.md counts the bytes that costs).
:class:`Backoff` computes those waits and every other wait after a failure (the
watcher's polls, downloads and visibility checks), so there is one formula to read
and test. The clock is injectable so that retry and polling tests run on fake time.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ..errors import StoreError, ThrottledError, TransientStoreError, UsageError
from ..units import require_int, require_non_negative

T = TypeVar("T")
#: HTTP statuses by which a store says "over the request rate: slow down" (S3's 503
#: SlowDown, GCS's 429, Azure's 503 ServerBusy): :class:`ThrottledError` in every backend.
THROTTLE_STATUSES = frozenset({429, 503})
_MAX_DOUBLINGS = 40  # 2**40 times any first wait is past every cap: no float overflow


class Clock(Protocol):
    """What retries and the watcher ask of a clock, so that a test can pass a :class:`FakeClock`."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards: for waits and deadlines."""
        ...

    def time(self) -> float:
        """Seconds since the epoch: for timestamps that another host reads."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; 0 or less returns at once."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        """``time.monotonic()``, seconds."""
        return time.monotonic()

    def time(self) -> float:
        """``time.time()``, seconds since the epoch."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """``time.sleep(seconds)``; 0 or less returns at once."""
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when something sleeps on it (for tests)."""

    def __init__(self, start_s: float = 1_000_000.0) -> None:
        self._now_s = start_s
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        """The fake time, seconds: it moves only when something sleeps."""
        with self._lock:
            return self._now_s

    def time(self) -> float:
        """The same fake time as :meth:`monotonic`: one clock serves both."""
        return self.monotonic()

    def sleep(self, seconds: float) -> None:
        """Record ``seconds`` in ``sleeps``, move the time on by it (0 for less); never blocks."""
        with self._lock:
            self.sleeps.append(seconds)
            self._now_s += max(0.0, seconds)


#: The real clock, the default wherever a clock can be injected.
SYSTEM_CLOCK: Clock = SystemClock()


@dataclass(frozen=True)
class Backoff:
    """Capped exponential waits with jitter.

    The wait after ``n`` failures in a row is ``first_s * 2 ** (n - 1)``, capped
    at ``cap_s``, times a factor drawn uniformly from ``[low, high]``. Jitter keeps
    clients that failed together from retrying together: full jitter
    (:meth:`full`, factors in [0, 1]) spreads a burst of retries over the whole
    window, for the store's many concurrent requests; jitter around the wait
    (:meth:`around`, [1 - f, 1 + f]) keeps a period roughly as configured while
    a thousand workers drift out of step, for polls.
    """

    first_s: float
    cap_s: float
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        require_non_negative("Backoff.first_s", self.first_s)
        if not (self.cap_s >= self.first_s and 0 <= self.low <= self.high):
            raise UsageError(
                f"Backoff must satisfy first_s <= cap_s and 0 <= low <= high, got {self}"
            )

    @classmethod
    def full(cls, first_s: float, cap_s: float) -> Backoff:
        """Waits drawn from [0, the capped exponential wait] ("full jitter")."""
        return cls(first_s, cap_s, 0.0, 1.0)

    @classmethod
    def around(cls, first_s: float, cap_s: float, fraction: float) -> Backoff:
        """Waits within ``fraction`` of the capped exponential wait, either side."""
        return cls(first_s, cap_s, 1.0 - fraction, 1.0 + fraction)

    def wait_s(self, failures: int, rng: random.Random) -> float:
        """The wait before the next try after ``failures`` failures in a row (0 counts as 1)."""
        doublings = min(max(failures - 1, 0), _MAX_DOUBLINGS)
        return min(self.cap_s, self.first_s * 2**doublings) * rng.uniform(self.low, self.high)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a transient failure, and a throttled request.

    ``max_attempts`` tries (waits from ``base_delay_s`` doubling to ``max_delay_s``) for a
    failure that is the connection's or the server's; ``throttled_attempts`` tries (waits
    from ``throttled_base_delay_s`` doubling to ``throttled_max_delay_s``: about 75 s in
    all, on average) for a store that asks its clients to slow down. Each kind counts
    against its own budget; both full jitter.
    """

    max_attempts: int = 6
    base_delay_s: float = 0.2
    max_delay_s: float = 10.0
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False)
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)
    throttled_attempts: int = 12
    throttled_base_delay_s: float = 1.0
    throttled_max_delay_s: float = 20.0

    def __post_init__(self) -> None:
        require_int("RetryPolicy.max_attempts", self.max_attempts)
        require_int("RetryPolicy.throttled_attempts", self.throttled_attempts)
        for first, cap in (
            (self.base_delay_s, self.max_delay_s),
            (self.throttled_base_delay_s, self.throttled_max_delay_s),
        ):
            if first < 0 or cap < first:
                raise UsageError(
                    "RetryPolicy delays must satisfy 0 <= base_delay_s <= max_delay_s "
                    "(and the same for throttled_base_delay_s and throttled_max_delay_s)"
                )

    @property
    def backoff(self) -> Backoff:
        """The waits between tries of a transient failure: full jitter, ``base_delay_s``
        doubling to ``max_delay_s``."""
        return Backoff.full(self.base_delay_s, self.max_delay_s)

    @property
    def throttled_backoff(self) -> Backoff:
        """The waits between tries of a throttled request: full jitter,
        ``throttled_base_delay_s`` doubling to ``throttled_max_delay_s``."""
        return Backoff.full(self.throttled_base_delay_s, self.throttled_max_delay_s)

    def delay_s(self, attempt: int) -> float:
        """Full-jitter backoff before retry number ``attempt`` (1-based)."""
        return self.backoff.wait_s(attempt, self.rng)

    def throttled_delay_s(self, attempt: int) -> float:
        """Full-jitter backoff before retry number ``attempt`` of a throttled request."""
        return self.throttled_backoff.wait_s(attempt, self.rng)

    def attempts(self) -> Attempts:
        """A fresh count of one request's failures in a row."""
        return Attempts(self)

    def call(self, fn: Callable[[], T], what: str) -> T:
        """Run ``fn``, retrying TransientStoreError; ``what`` names it in the final error."""
        attempts = self.attempts()
        while True:
            try:
                return fn()
            except TransientStoreError as exc:
                if not attempts.failed(exc):
                    raise StoreError(
                        f"{what} failed after {attempts.count} attempts: {exc}"
                    ) from exc


class Attempts:
    """One request's failures in a row, each kind against its own budget of the policy."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.transient = 0
        self.throttled = 0

    @property
    def count(self) -> int:
        return self.transient + self.throttled

    def failed(self, exc: BaseException | None) -> bool:
        """Count one failure (``exc``; None: a stream that ended early) and wait the backoff
        it asks for: True when the request may go again, False when its budget is spent."""
        policy = self.policy
        if isinstance(exc, ThrottledError):
            self.throttled += 1
            if self.throttled >= policy.throttled_attempts:
                return False
            wait_s = policy.throttled_delay_s(self.throttled)
        else:
            self.transient += 1
            if self.transient >= policy.max_attempts:
                return False
            wait_s = policy.delay_s(self.transient)
        policy.clock.sleep(wait_s)
        return True

    def reset(self) -> None:
        """The request made progress: its next failure is a first one again."""
        self.transient = self.throttled = 0
