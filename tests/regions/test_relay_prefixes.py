"""The relay copies a version whose payload is dealt over payload prefixes, key for key."""

from __future__ import annotations

import dataclasses

from tests.regions.support import SMALL, model, nudge, same, three_regions
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.publish.publisher import Publisher
from wanrl_s3.regions.relay import Relay, RelayConfig


def test_the_relay_copies_spread_payload_under_the_same_keys(s3_endpoint: str) -> None:
    regions = three_regions(s3_endpoint, "copy")
    primary = regions.store("use1")
    pub = Publisher(primary, dataclasses.replace(SMALL, payload_prefixes=3))
    states = {1: model(1)}
    states[2] = nudge(states[1], 2)
    for version, state in states.items():
        pub.publish(state, version)
    spread = sorted(o.key for o in primary.list("v/") if o.key.startswith("v/p"))
    assert {key.split("/")[1] for key in spread} == {"p0", "p1", "p2"}
    with Relay.from_regions(regions, RelayConfig(poll_interval_s=0.05)) as relay:
        assert len(relay.sync_once()) == 4  # two versions to each replica
    for name in ("euw1", "apne1"):
        replica = regions.store(name)
        assert sorted(o.key for o in replica.list("v/") if o.key.startswith("v/p")) == spread
        with Subscriber(replica) as sub:
            assert sub.missing(2) is None
            assert same(sub.fetch(2).tensors, states[2])
