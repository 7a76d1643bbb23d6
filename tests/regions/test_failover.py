"""Fallback: a worker whose region stalls reads from a fresh one, says so, and comes back."""

from __future__ import annotations

import random

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
from wanrl_s3.errors import UsageError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fetch.watch import WatchConfig, Watcher
from wanrl_s3.publish.publisher import Publisher
from wanrl_s3.regions.failover import FailoverConfig, RegionFailover

FAST = WatchConfig(poll_interval_s=0.02, visible_backoff_s=0.005, retry_backoff_s=0.01)


def _install(w: Watcher, version: int) -> None:
    def installed() -> bool:
        if w.wait_ready(0.05) is not None:
            w.install()
        return w.installed_version == version

    wait_for(installed)


@pytest.mark.parametrize("stall", ["nothing arrives", "only LATEST and manifests arrive"])
def test_a_stalled_region_is_left_for_a_fresh_one_and_rejoined(
    s3_endpoint: str, stall: str
) -> None:
    regions = three_regions(s3_endpoint, "replicate")
    primary, home, other = (regions.store(n) for n in ("use1", "euw1", "apne1"))
    rng = random.Random(5)
    pub = Publisher(primary, SMALL)
    state = model(1)
    pub.publish(state, 1)
    for replica in (home, other):
        FakeReplicator(primary, replica, rng).run()
    switches: list[tuple[str, str | None]] = []
    with Subscriber(home) as sub, Watcher(sub, FAST) as w:
        failover = RegionFailover(
            regions,
            "euw1",
            w,
            lambda name: Subscriber(regions.store(name)),
            FailoverConfig(max_lag_versions=1),
            order=("apne1", "use1"),
            on_switch=lambda region, why: switches.append((region, why)),
        )
        try:
            _install(w, 1)
            assert failover.check() is None  # in step with the primary
            for v in (2, 3):  # apne1 stalls for good, euw1 for now
                state = nudge(state, v)
                pub.publish(state, v)
                if stall != "nothing arrives":
                    replicator = FakeReplicator(primary, home, rng, adversarial=True)
                    for key in replicator.pending():
                        if not key.endswith(".bin"):
                            replicator.copy(key)
            reason = failover.check()
            assert reason == (
                "region euw1 lags the primary use1 by 2 versions (limit 1): "
                "reading from region use1"
            )  # apne1 lags too: passed over
            assert failover.serving == "use1" and failover.fallback == reason
            _install(w, 3)
            assert same(w._state.installed.tensors, state)  # type: ignore[union-attr]
            assert failover.check() is None  # home still behind: stay
            FakeReplicator(primary, home, rng).run()
            back = failover.check()
            assert back is not None
            assert back.startswith("region euw1 has caught up (v3 is whole there)")
            assert switches == [("use1", reason), ("euw1", None)]
            state = nudge(state, 4)
            pub.publish(state, 4)
            FakeReplicator(primary, home, rng).run()
            _install(w, 4)
            assert w.sub.store.url == home.url
        finally:
            w.stop()
            failover.close()


def test_the_primary_never_lags_and_the_limit_is_validated(s3_endpoint: str) -> None:
    regions = three_regions(s3_endpoint, "copy")
    with Subscriber(regions.store("use1")) as sub:
        failover = RegionFailover(
            regions, "use1", Watcher(sub), lambda n: sub, FailoverConfig(max_lag_versions=1)
        )
        Publisher(regions.store("use1"), SMALL).publish(model(1), 5)
        assert failover.check() is None and failover.serving == "use1"
    for bad in (0, True, 1.5):
        with pytest.raises(UsageError, match="max_lag_versions must be an integer >= 1"):
            FailoverConfig(max_lag_versions=bad)  # type: ignore[arg-type]
