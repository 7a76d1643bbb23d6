"""RateLimit: S3's per-prefix request rate, partitioned by key, windowed on a given clock."""

from __future__ import annotations

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.store import FakeClock
from wanrl_s3.testing import ONE_PARTITION, PAYLOAD_PREFIX_PARTITIONS, RateLimit

PAYLOAD = "/b/runs/r/v/p{k}/000000000001/abc/000000.bin"


def test_each_partition_admits_its_budget_per_window_and_refuses_the_rest() -> None:
    clock = FakeClock(start_s=0.0)
    limit = RateLimit(3, partition=PAYLOAD_PREFIX_PARTITIONS, clock=clock)
    p0, p1 = PAYLOAD.format(k=0), PAYLOAD.format(k=1)
    assert [limit.admit("GET", p0) for _ in range(5)] == [True] * 3 + [False] * 2
    assert [limit.admit("GET", p1) for _ in range(3)] == [True] * 3  # a budget of its own
    assert limit.admit("GET", "/b/runs/r/LATEST")  # the rest of the bucket: a third one
    clock.sleep(1.0)  # the next window
    assert limit.admit("GET", p0)
    assert limit.admitted["/b/runs/r/v/p0/"] == 4 and limit.refused["/b/runs/r/v/p0/"] == 2
    assert limit.peak["/b/runs/r/v/p0/"] == 3 and limit.admitted["/b/"] == 1


def test_a_listing_counts_against_the_prefix_it_lists() -> None:
    limit = RateLimit(1, partition=PAYLOAD_PREFIX_PARTITIONS, clock=FakeClock())
    listing = "/b?list-type=2&prefix=runs%2Fr%2Fv%2Fp2%2F000000000001%2F"
    assert limit.partition_of("GET", listing) == "/b/runs/r/v/p2/"
    assert limit.partition_of("GET", "/b?list-type=2&prefix=runs%2Fr%2Fv%2F") == "/b/"
    assert limit.partition_of("PUT", PAYLOAD.format(k=2)) is None  # reads only, by default


def test_one_partition_is_the_whole_bucket() -> None:
    limit = RateLimit(2, partition=ONE_PARTITION, clock=FakeClock())
    keys = [PAYLOAD.format(k=k) for k in range(3)]
    assert [limit.admit("GET", key) for key in keys] == [True, True, False]


@pytest.mark.parametrize("bad", [{"per_s": 0}, {"per_s": 1, "window_s": 0}])
def test_a_limit_that_admits_nothing_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        RateLimit(**bad)  # type: ignore[arg-type]
