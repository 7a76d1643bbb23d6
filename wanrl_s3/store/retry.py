"""Retries for transient store failures, on an injectable clock.

The s3 backend maps its library's connection resets, timeouts, throttling and
5xx answers to :class:`~wanrl_s3.errors.TransientStoreError`; everything built on
the store primitives retries those (and only those) here, with capped
exponential backoff and full jitter. The clock is injectable so that retry and
polling tests run on fake time.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ..errors import StoreError, TransientStoreError, UsageError
from ..units import require_int

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def time(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when something sleeps on it (for tests)."""

    def __init__(self, start_s: float = 1_000_000.0) -> None:
        self._now_s = start_s
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        with self._lock:
            return self._now_s

    def time(self) -> float:
        return self.monotonic()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now_s += max(0.0, seconds)


SYSTEM_CLOCK: Clock = SystemClock()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a transient failure."""

    max_attempts: int = 6
    base_delay_s: float = 0.2
    max_delay_s: float = 10.0
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False)
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        require_int("RetryPolicy.max_attempts", self.max_attempts)
        if self.base_delay_s < 0 or self.max_delay_s < self.base_delay_s:
            raise UsageError("RetryPolicy delays must satisfy 0 <= base_delay_s <= max_delay_s")

    def delay_s(self, attempt: int) -> float:
        """Full-jitter backoff before retry number ``attempt`` (1-based)."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return self.rng.uniform(0, cap)

    def call(self, fn: Callable[[], T], what: str) -> T:
        """Run ``fn``, retrying TransientStoreError; ``what`` names it in the final error."""
        for attempt in range(1, self.max_attempts + 1):
            try:
                return fn()
            except TransientStoreError as exc:
                if attempt == self.max_attempts:
                    raise StoreError(f"{what} failed after {attempt} attempts: {exc}") from exc
                self.clock.sleep(self.delay_s(attempt))
        raise AssertionError("unreachable")  # pragma: no cover
