"""The byte count of a download in flight is whole although many threads add to it.

A download's ranged GETs run on a pool and each reports its bytes to the
watcher, which decides from that count whether finishing a superseded version
costs more than going straight to the newer one. An increment that loses
another thread's update makes the download look further behind than it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fetch.watch import Watcher
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store

FIRST, OTHER = 1000, 24  # bytes two download threads report at the same time


class SwitchingInt(int):
    """A byte count whose addition runs another download thread's report in the middle.

    With a plain int, ``total += n`` gives CPython no point at which to switch
    threads, so a lost update is rare in a test and real in production (a free-
    threaded build, or a switch at an unlucky instruction). ``total + this``
    calls this ``__radd__`` after ``total`` was read and before the sum is
    stored: it starts the other report and waits for it (bounded). A counter
    that serialises its updates makes the other report wait instead; the wait
    times out and both updates land.
    """

    def __new__(cls, value: int, other: threading.Thread) -> SwitchingInt:
        made = super().__new__(cls, value)
        made.other = other  # type: ignore[attr-defined]
        return made

    def __radd__(self, total: int) -> int:
        other: threading.Thread = self.other  # type: ignore[attr-defined]
        other.start()
        other.join(timeout=1.0)
        return int(total) + int(self)


def reporting_concurrently(real: Callable[..., object]) -> Callable[..., object]:
    """``Subscriber.fetch`` that first has two threads report bytes at once, as its pool does."""

    def fetch(self: Subscriber, version: int, **kwargs: object) -> object:
        progress = kwargs.pop("progress")
        assert callable(progress)
        other = threading.Thread(target=progress, args=(OTHER,))
        first = threading.Thread(target=progress, args=(SwitchingInt(FIRST, other),))
        first.start()
        first.join()
        if other.ident is None:  # the count never added our int (no read-modify-write)
            other.start()
        other.join()
        return real(self, version, **kwargs)

    return fetch


def test_bytes_reported_by_concurrent_download_threads_are_all_counted(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"file://{tmp_path}/s")
    rng = np.random.default_rng(0)
    state = {"w": rng.integers(0, 2**16, 1024, np.uint16).view(ml_dtypes.bfloat16)}
    Publisher(store, PublishConfig(delta="never")).publish(state, 1)
    monkeypatch.setattr(Subscriber, "fetch", reporting_concurrently(Subscriber.fetch))
    with Subscriber(store) as sub:
        w = Watcher(sub)
        w.poll_once()
        assert w.fetch_once()
        assert w._prefetch.progress.value == FIRST + OTHER
