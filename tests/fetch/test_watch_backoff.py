"""The watcher's waits: each kind of failure backs off from its own first wait to its cap."""

from __future__ import annotations

import random

from wanrl_s3.fetch.watch import WatchConfig
from wanrl_s3.fetch.watch.failures import Streak

STEADY = WatchConfig(
    poll_interval_s=4.0,
    jitter_fraction=0.0,
    retry_backoff_s=5.0,
    visible_backoff_s=0.5,
    max_backoff_s=30.0,
)


def waits(streak: Streak, n: int) -> list[float]:
    return [streak.fail() for _ in range(n)]


def test_each_kind_backs_off_from_its_first_wait_to_its_cap() -> None:
    rng = random.Random(0)
    assert waits(Streak(STEADY.download_backoff, rng), 5) == [5, 10, 20, 30, 30]
    assert waits(Streak(STEADY.poll_backoff, rng), 5) == [4, 8, 16, 30, 30]
    # replication lag is no failure: checked at least as often as LATEST is polled
    assert waits(Streak(STEADY.visibility_backoff, rng), 5) == [0.5, 1, 2, 4, 4]


def test_a_success_starts_the_backoff_over() -> None:
    streak = Streak(STEADY.download_backoff, random.Random(0))
    waits(streak, 3)
    assert streak.reset() == 3 and streak.fail() == 5


def test_polls_that_work_wait_the_interval_jittered_around_it() -> None:
    config = WatchConfig(poll_interval_s=10.0, jitter_fraction=0.2)
    rng = random.Random(3)
    drawn = [config.next_wait_s(rng) for _ in range(500)]
    assert all(8.0 <= w <= 12.0 for w in drawn) and max(drawn) - min(drawn) > 3.0
