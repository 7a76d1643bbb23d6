"""Replication-aware readers: a version a replica shows only in part is not yet visible.

A fake replicator copies the primary's objects to a replica bucket one by one
in a random order (LATEST and manifests before their payload, in the
adversarial case), over real HTTP to SeaweedFS. Readers must never install a
version partly, must not count the wait as an error, and must get there once
the copy completes.
"""

from __future__ import annotations

import logging
import random
import threading

import pytest

from tests.regions.support import (
    SMALL,
    FakeReplicator,
    model,
    nudge,
    same,
    three_regions,
    wait_for,
)
from wanrl_s3.errors import NotFoundError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fetch.watch import InstallResult, WatchConfig, Watcher, wait_visible
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import Publisher
from wanrl_s3.store import FakeClock

FAST = WatchConfig(poll_interval_s=0.02, visible_backoff_s=0.001, retry_backoff_s=0.01)


@pytest.fixture
def pair(s3_endpoint: str):
    regions = three_regions(s3_endpoint, "replicate")
    return regions.store("use1"), regions.store("euw1")


def test_nothing_is_installed_until_the_last_object_lands(pair, caplog) -> None:
    primary, replica = pair
    pub = Publisher(primary, SMALL)
    states = {1: model(1)}
    states[2] = nudge(states[1], 2)
    for v, state in states.items():
        pub.publish(state, v)
    caplog.set_level(logging.INFO, logger="wanrl_s3.fetch.watch")
    replicator = FakeReplicator(primary, replica, random.Random(3), adversarial=True)
    with Subscriber(replica) as sub:
        w = Watcher(sub, FAST)
        keys = replicator.pending()
        assert keys[0] == layout.LATEST_KEY and keys[1].endswith("manifest.json")
        for i, key in enumerate(keys):
            replicator.copy(key)
            if key == layout.LATEST_KEY:
                assert w.poll_once().version == 2  # LATEST says v2: nothing else is there
            done = i == len(keys) - 1
            assert w.fetch_once() is done, f"after {i + 1} of {len(keys)} objects"
            assert (w.ready_version == 2) is done and w.last_error is None
            assert sub.is_visible(2) is done
        result = w.install()
    assert result is not None and result.version == 2 and result.path == (1, 2)
    assert same(w._state.installed.tensors, states[2])  # type: ignore[union-attr]
    assert "v2 is not yet visible" in caplog.text and "still replicating" in caplog.text


def test_missing_names_what_the_plan_from_the_held_version_still_needs(pair) -> None:
    primary, replica = pair
    pub = Publisher(primary, SMALL)
    pub.publish(model(1), 1)
    FakeReplicator(primary, replica, random.Random(0)).run()
    pub.publish(nudge(model(1), 2), 2)
    replicator = FakeReplicator(primary, replica, random.Random(1), adversarial=True)
    steps = replicator.steps()
    next(steps), next(steps)  # LATEST and v2's manifest, not its payload
    with Subscriber(replica) as sub:
        assert sub.missing(3) == "the manifest of v3"
        assert "1 of the 1 payload objects it needs" in (sub.missing(2, have_version=1) or "")
        assert "payload objects it needs" in (sub.missing(2) or "")  # from the keyframe
        assert sub.is_visible(1)
        for _ in steps:
            pass
        assert sub.missing(2) is None and sub.missing(2, have_version=1) is None


@pytest.mark.parametrize("seed", [11, 12])
def test_a_watching_reader_gets_every_version_whole_while_replication_shuffles(
    pair, seed: int, caplog
) -> None:
    primary, replica = pair
    rng = random.Random(seed)
    pub = Publisher(primary, SMALL)
    states = {1: model(seed)}
    for v in range(2, 5):
        states[v] = nudge(states[v - 1], v)
    installs: list[tuple[InstallResult, bool]] = []
    caplog.set_level(logging.INFO)
    with Subscriber(replica) as sub, Watcher(sub, FAST) as w:
        stop = threading.Event()

        def install_loop() -> None:
            while not stop.is_set():
                if w.wait_ready(0.05) is not None:
                    result = w.install()
                    if result is not None:
                        installs.append(
                            (
                                result,
                                same(
                                    w._state.installed.tensors,  # type: ignore[union-attr]
                                    states[result.version],
                                ),
                            )
                        )

        t = threading.Thread(target=install_loop)
        t.start()
        try:
            for v, state in states.items():
                pub.publish(state, v)
                FakeReplicator(primary, replica, rng, adversarial=rng.random() < 0.5).run()
            wait_for(lambda: w.installed_version == 4)
        finally:
            stop.set()
            t.join()
    assert installs and all(whole for _, whole in installs)  # never a partial version
    assert [r.version for r, _ in installs] == sorted({r.version for r, _ in installs})
    assert "download of" not in caplog.text  # waiting was never taken for an error


def test_wait_visible_backs_off_then_gives_up_naming_what_is_missing(pair) -> None:
    primary, replica = pair
    Publisher(primary, SMALL).publish(model(1), 1)
    replicator = FakeReplicator(primary, replica, random.Random(0), adversarial=True)
    steps = replicator.steps()
    next(steps), next(steps)  # LATEST and the manifest only
    clock = FakeClock()
    with Subscriber(replica) as sub:
        with pytest.raises(NotFoundError, match=r"v1 is still not whole .* after 30 s"):
            wait_visible(sub, 1, timeout_s=30, clock=clock, rng=random.Random(0))
        waits = clock.sleeps
        assert waits[1] > waits[0] and sum(waits) == pytest.approx(30)  # exponential, capped
        for _ in steps:
            pass
        wait_visible(sub, 1, timeout_s=30, clock=clock)
        assert same(sub.fetch(1).tensors, model(1))


def test_a_payload_object_longer_than_its_manifest_says_is_whole(pair) -> None:
    """Bytes appended to an object are never read (ranges stop at the manifest's sizes) and
    every byte read is verified: a watcher installs the version, as pull does."""
    primary, _ = pair
    state = model(7)
    Publisher(primary, SMALL).publish(state, 1)
    for key in [o.key for o in primary.list("v/") if o.key.endswith(".bin")]:
        primary.put_bytes(key, primary.get_bytes(key) + b"trailing bytes nobody reads")
    with Subscriber(primary) as sub:
        assert sub.missing(1) is None
        w = Watcher(sub, FAST)
        assert w.poll_once().version == 1
        assert w.fetch_once() and w.last_error is None
        w.install()
    assert same(w._state.installed.tensors, state)  # type: ignore[union-attr]
