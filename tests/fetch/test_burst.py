"""A burst of readers against a store with S3's request-rate limit per prefix.

SeaweedFS behind :class:`FaultProxy` with a :class:`RateLimit`: each partition of the
bucket's keys admits a set number of reads per one-second window and answers the rest
503 SlowDown, as S3 does per prefix. The windows run on the readers' own retry clock
(fake time: it moves only when a reader backs off), so what is refused depends on how
many reads each prefix is asked for, not on how fast this machine asks.

With the payload in one prefix (the layout before payload prefixes, and still the
default), a burst of readers is throttled; dealt over four prefixes
(``PublishConfig(payload_prefixes=4)``), the same burst stays under the limit. Every
reader installs the version bit for bit either way: a throttled read waits the longer
backoff of a throttled request (``RetryPolicy.throttled_*``) instead of failing its
download after six tries, so a SlowDown in the middle of a download no longer throws
away what was already read and verified.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest

from wanrl_s3 import PublishConfig, Publisher, RetryPolicy, Subscriber, open_store
from wanrl_s3.errors import StoreError
from wanrl_s3.store import FakeClock, ObjectStore
from wanrl_s3.testing import (
    PAYLOAD_PREFIX_PARTITIONS,
    Fault,
    FaultProxy,
    RateLimit,
    Rule,
    make_bucket,
    random_bf16_state,
)

KiB = 1024
READERS = 8
TENSORS = 8  # of 64 KiB each: one payload object each, read in two GETs of 32 KiB
LIMIT_PER_S = 40  # a reader asks LATEST, the manifest and 16 payload GETs: 18 in all
State = dict[str, np.ndarray]


def policy() -> State:
    return random_bf16_state([(f"layer.{i}.w", (32 * KiB,)) for i in range(TENSORS)], seed=30)


def publish(endpoint: str, state: State, prefixes: int) -> str:
    url = f"s3://{make_bucket(endpoint)}/runs/burst"
    config = PublishConfig(object_bytes=64 * KiB, full_coding="raw", payload_prefixes=prefixes)
    Publisher(open_store(url, endpoint_url=endpoint), config).publish(state, 1)
    return url


@dataclass
class Throttled:
    """The proxy in front of the server, its limit, and the clock the windows run on."""

    proxy: FaultProxy
    limit: RateLimit
    clock: FakeClock

    def reader_store(self, url: str, seed: int, retry: RetryPolicy | None = None) -> ObjectStore:
        retry = retry or RetryPolicy(clock=self.clock, rng=random.Random(seed))
        return open_store(url, endpoint_url=self.proxy.url, retry=retry)


@pytest.fixture
def throttled(s3_endpoint: str) -> Iterator[Throttled]:
    clock = FakeClock(start_s=0.0)
    limit = RateLimit(LIMIT_PER_S, partition=PAYLOAD_PREFIX_PARTITIONS, clock=clock)
    with FaultProxy(s3_endpoint, rate_limit=limit) as proxy:
        yield Throttled(proxy, limit, clock)


def burst(throttled: Throttled, url: str) -> list[State]:
    """``READERS`` readers fetch the newest version at once; what each one installed."""
    start = threading.Barrier(READERS)

    def read(seed: int) -> State:
        with Subscriber(
            throttled.reader_store(url, seed), concurrency=4, range_bytes=32 * KiB
        ) as sub:
            start.wait()
            return dict(sub.fetch().tensors)

    with ThreadPoolExecutor(READERS) as pool:
        return list(pool.map(read, range(READERS)))


def assert_bit_exact(got: State, want: State) -> None:
    assert sorted(got) == sorted(want)
    assert all(got[k].view(np.uint16).tobytes() == want[k].view(np.uint16).tobytes() for k in want)


@pytest.mark.parametrize("prefixes", [1, 4])
def test_a_burst_is_throttled_on_one_prefix_and_not_on_four(
    s3_endpoint: str, throttled: Throttled, prefixes: int
) -> None:
    state = policy()
    url = publish(s3_endpoint, state, prefixes)
    for installed in burst(throttled, url):
        assert_bit_exact(installed, state)
    limit = throttled.limit
    assert sum(limit.admitted.values()) == READERS * (2 + 2 * TENSORS)  # nothing read twice
    if prefixes == 1:  # 144 reads of one partition: past its 40 a window
        assert list(limit.admitted) == [f"/{url[5:].split('/')[0]}/"]
        assert sum(limit.refused.values()) > 0 and throttled.clock.sleeps
    else:  # LATEST and the manifest on the bucket, the payload over four prefixes
        assert sorted(limit.peak.values()) == [2 * READERS] + [4 * READERS] * 4
        assert sum(limit.refused.values()) == 0 and not throttled.clock.sleeps


def test_a_slowdown_mid_download_keeps_what_was_read(
    s3_endpoint: str, throttled: Throttled
) -> None:
    """The fourth payload object is refused nine times in a row, after three were read and
    verified: the read waits it out and the download goes on, every byte read once. Six
    tries of the transient budget would have failed the download (and a worker would have
    started it over), which the last part shows."""
    state = policy()
    url = publish(s3_endpoint, state, 1)
    refusals = Rule(Fault.SLOW_DOWN, method="GET", key=r"/000003\.bin$", count=9)
    throttled.proxy.set_rules([refusals])
    throttled.proxy.rate_limit = None
    with Subscriber(throttled.reader_store(url, 1), concurrency=1, range_bytes=64 * KiB) as sub:
        plan = sub.plan()
        throttled.proxy.reset_counters()
        snap = sub.fetch()
        assert_bit_exact(dict(snap.tensors), state)
        assert snap.downloaded_bytes == plan.download_bytes == TENSORS * 64 * KiB
    assert throttled.proxy.counts[Fault.SLOW_DOWN] == 9 and throttled.proxy.repeats == 9
    throttled.proxy.set_rules([refusals])
    impatient = RetryPolicy(clock=throttled.clock, throttled_attempts=6)
    with (
        Subscriber(throttled.reader_store(url, 2, impatient), concurrency=1) as sub,
        pytest.raises(StoreError, match=r"000003\.bin .* after 6 attempts: .*SlowDown"),
    ):
        sub.fetch()
