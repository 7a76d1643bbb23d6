"""The codecs' shared thread pool: every job has ended when a parallel map returns or raises."""

from __future__ import annotations

import threading
import time

import pytest

from wanrl_s3.codec.delta import _parallel_map


def test_the_results_keep_their_order_and_the_caller_takes_a_share() -> None:
    threads: list[str] = []

    def job(x: int) -> int:
        threads.append(threading.current_thread().name)
        return x * x

    assert _parallel_map(job, [1, 2, 3, 4], 2) == [1, 4, 9, 16]
    assert threading.current_thread().name in threads  # the first item ran here


def test_a_failing_share_raises_only_after_the_others_have_ended() -> None:
    done: list[int] = []

    def job(x: int) -> int:
        if x == 0:
            raise ValueError("first share fails at once")
        time.sleep(0.3)  # the others still write into the caller's buffers meanwhile
        done.append(x)
        return x

    with pytest.raises(ValueError, match="fails at once"):
        _parallel_map(job, [0, 1, 2], 3)
    assert sorted(done) == [1, 2]
