"""The retry layer: one backoff formula, retries of named transient errors only, on fake time."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from wanrl_s3.errors import (
    NotFoundError,
    StoreError,
    ThrottledError,
    TransientStoreError,
    UsageError,
)
from wanrl_s3.store import FakeClock, RetryPolicy
from wanrl_s3.store.retry import Backoff


class Median(random.Random):
    """A random source that always draws the middle of the range: waits become exact."""

    def uniform(self, a: float, b: float) -> float:
        return (a + b) / 2


def test_waits_double_from_the_first_up_to_the_cap() -> None:
    backoff = Backoff.around(0.5, 3.0, 0.0)
    waits = [backoff.wait_s(n, random.Random(0)) for n in range(7)]
    assert waits == [0.5, 0.5, 1.0, 2.0, 3.0, 3.0, 3.0]  # 0 failures waits like 1


def test_a_long_streak_stays_at_the_cap_without_overflow() -> None:
    assert Backoff.around(0.2, 60.0, 0.0).wait_s(10**6, random.Random(0)) == 60.0


@pytest.mark.parametrize("seed", range(5))
def test_jitter_stays_inside_its_band(seed: int) -> None:
    rng = random.Random(seed)
    for failures, base in ((1, 1.0), (2, 2.0), (3, 4.0), (9, 8.0)):
        around = Backoff.around(1.0, 8.0, 0.25).wait_s(failures, rng)
        full = Backoff.full(1.0, 8.0).wait_s(failures, rng)
        assert 0.75 * base <= around <= 1.25 * base and 0 <= full <= base


def test_full_jitter_spreads_over_the_whole_window() -> None:
    rng = random.Random(1)
    waits = [Backoff.full(1.0, 1.0).wait_s(1, rng) for _ in range(2000)]
    assert min(waits) < 0.05 and max(waits) > 0.95


@pytest.mark.parametrize(
    "bad", [(-1.0, 1.0, 0.0, 1.0), (2.0, 1.0, 0.0, 1.0), (1.0, 2.0, 1.5, 1.0), (1.0, 2.0, -0.1, 1)]
)
def test_a_backoff_that_makes_no_sense_is_refused(bad: tuple[float, float, float, float]) -> None:
    with pytest.raises(UsageError, match="Backoff"):
        Backoff(*bad)


def test_the_retry_policy_waits_its_backoff_on_its_clock_between_transient_failures() -> None:
    clock = FakeClock()
    policy = RetryPolicy(
        max_attempts=4, base_delay_s=0.2, max_delay_s=0.5, clock=clock, rng=Median()
    )
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise TransientStoreError("connection reset")
        return "done"

    assert policy.call(flaky, "GET k") == "done"
    assert clock.sleeps == [0.1, 0.2, 0.25]  # full jitter's middle of 0.2, 0.4, 0.5 (capped)


def test_the_retry_policy_gives_up_after_max_attempts_naming_the_count() -> None:
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=3, clock=clock)

    def down() -> None:
        raise TransientStoreError("503 Slow Down")

    with pytest.raises(StoreError, match="GET k failed after 3 attempts: 503") as err:
        policy.call(down, "GET k")
    assert isinstance(err.value.__cause__, TransientStoreError) and len(clock.sleeps) == 2


def test_an_error_that_is_not_transient_is_not_retried() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def missing() -> None:
        calls.append(1)
        raise NotFoundError("s3://b/k does not exist")

    with pytest.raises(NotFoundError):
        RetryPolicy(clock=clock).call(missing, "GET k")
    assert calls == [1] and clock.sleeps == []


# -- a store over its request rate ----------------------------------------------------------
def raising(*errors: Exception) -> Callable[[], str]:
    """A call that raises each of ``errors`` in turn, then answers "done"."""
    left = list(errors)

    def call() -> str:
        if left:
            raise left.pop(0)
        return "done"

    return call


def test_a_throttled_request_waits_longer_and_more_often_than_a_transient_one() -> None:
    """Eleven SlowDowns in a row are ridden out (six attempts would have failed the call),
    each wait from the throttled backoff: 1 s doubling to 20 s, full jitter."""
    clock = FakeClock()
    policy = RetryPolicy(clock=clock, rng=Median())
    assert policy.call(raising(*[ThrottledError("SlowDown")] * 11), "GET k") == "done"
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]
    with pytest.raises(StoreError, match="GET k failed after 12 attempts: SlowDown"):
        policy.call(raising(*[ThrottledError("SlowDown")] * 12), "GET k")


def test_each_kind_of_failure_counts_against_its_own_budget() -> None:
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=3, throttled_attempts=3, clock=clock, rng=Median())
    two_each = [ThrottledError("SlowDown"), TransientStoreError("reset")] * 2
    assert policy.call(raising(*two_each), "GET k") == "done"  # inside both budgets
    assert clock.sleeps == [0.5, 0.1, 1.0, 0.2]
    with pytest.raises(StoreError, match="after 5 attempts: reset"):  # a third reset: too many
        policy.call(raising(*two_each, TransientStoreError("reset")), "GET k")


@pytest.mark.parametrize(
    "bad", [{"throttled_attempts": 0}, {"throttled_base_delay_s": -1.0},
            {"throttled_base_delay_s": 30.0}],  # over throttled_max_delay_s
)  # fmt: skip
def test_a_throttled_budget_that_makes_no_sense_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(UsageError, match="throttled"):
        RetryPolicy(**bad)  # type: ignore[arg-type]
