"""cost/fleet.py: a heterogeneous fleet's T_bcast, each worker on its own link."""

from __future__ import annotations

import pytest

from wanrl_s3.cost import (
    FetchModel,
    FleetLinks,
    WorkerLink,
    at_fraction_s,
    chain_layout,
    chain_worker_times_s,
    object_storage_fleet_s,
    object_storage_worker_s,
    object_storage_worker_terms,
)
from wanrl_s3.cost.fleet import chain_fleet_s, star_fleet_s
from wanrl_s3.cost.topology import chain_pipelined_s, star_unlimited_s
from wanrl_s3.errors import UsageError

NO_OVERHEAD = FetchModel(
    poll_interval_s=1e-9, round_trips=0, install_mb_per_s=1e12, goodput_share=1.0
)


def uniform(n: int, mbps: float = 100.0, rtt_ms: float = 0.0) -> FleetLinks:
    return FleetLinks(tuple(WorkerLink(f"w{i}", mbps, mbps, rtt_ms) for i in range(n)))


def test_the_quantile_is_the_status_reports_rule() -> None:
    times = [float(t) for t in range(1, 11)]  # ten workers
    assert at_fraction_s(times, 0.9) == 9.0  # ceil(0.9 * 10) = 9th
    assert at_fraction_s(times, 1.0) == 10.0 and at_fraction_s(times, 0.05) == 1.0
    assert at_fraction_s([3.0, 1.0, 2.0], 0.5) == 2.0  # ceil(1.5) = 2nd
    with pytest.raises(UsageError, match="fraction"):
        at_fraction_s(times, 0.0)


def test_one_workers_time_adds_poll_round_trips_bytes_and_install() -> None:
    link = WorkerLink("a", downlink_mbps=80.0, uplink_mbps=20.0, rtt_ms=50.0)
    fetch = FetchModel(poll_interval_s=2.0, round_trips=4, install_mb_per_s=500.0)
    # 1 s polling + 4 x 0.05 s + 0.1 GB over 80 Mbit/s at TCP's goodput + 1 GB at 500 MB/s
    wire_s = 10 * 1514 / 1448
    assert object_storage_worker_s(link, 0.1, 1.0, fetch) == pytest.approx(1 + 0.2 + wire_s + 2)
    decoding = FetchModel(poll_interval_s=2.0, delta_install_mb_per_s=250.0)
    assert object_storage_worker_s(link, 0.1, 1.0, decoding, delta=True) == pytest.approx(
        1 + 0.2 + wire_s + 4  # a delta installs at its own rate
    )
    assert object_storage_worker_s(link, 0.1, 1.0, decoding) == pytest.approx(
        1 + 0.2 + wire_s + 2  # a coded full version is smaller than the snapshot too
    )


def test_the_chain_installs_a_coded_full_version_at_the_full_rate() -> None:
    fleet = uniform(3)
    decoding = FetchModel(poll_interval_s=2.0, delta_install_mb_per_s=1.0)
    full = chain_worker_times_s(fleet, 0.5, 1.0, 300.0, decoding, 64.0, chains=1)
    delta = chain_worker_times_s(fleet, 0.5, 1.0, 300.0, decoding, 64.0, chains=1, delta=True)
    for f, d in zip(full, delta, strict=True):
        assert d - f == pytest.approx(1000.0 - 1000.0 / decoding.install_mb_per_s)


def test_a_uniform_fleet_is_the_uniform_formula() -> None:
    fleet = uniform(8)
    assert object_storage_fleet_s(fleet, 1.0, 1.0, NO_OVERHEAD) == pytest.approx(
        star_unlimited_s(1.0, 100.0)
    )
    # chain: 8 workers, B0 = 200 Mbit/s -> 2 chains of 4; 1 GB in 64 MB chunks is not whole,
    # so use 0.96 GB = 15 chunks: the pipelined formula exactly, for the last worker
    last = max(chain_worker_times_s(fleet, 0.96, 0.96, 200.0, NO_OVERHEAD, 64.0))
    assert last == pytest.approx(chain_pipelined_s(0.96, 200.0, 100.0, 8, 64.0))


def test_the_fraction_ignores_the_slowest_link_but_not_the_second_slowest() -> None:
    links = [WorkerLink(f"w{i}", 100.0, 100.0, 20.0) for i in range(8)]
    links += [WorkerLink("slow", 10.0, 10.0, 20.0), WorkerLink("slower", 5.0, 5.0, 20.0)]
    fleet = FleetLinks(tuple(links))
    fetch = FetchModel(poll_interval_s=1.0)
    t90 = object_storage_fleet_s(fleet, 0.1, 0.1, fetch, 0.9)
    assert t90 == pytest.approx(object_storage_worker_s(links[8], 0.1, 0.1, fetch))
    assert object_storage_fleet_s(fleet, 0.1, 0.1, fetch, 0.8) < t90 / 5


def test_chains_deal_fastest_first_and_a_slow_hop_holds_up_everyone_behind_it() -> None:
    fleet = FleetLinks(
        (
            WorkerLink("a", 50.0, 50.0, 0.0),
            WorkerLink("b", 100.0, 5.0, 0.0),  # fast down, slow up
            WorkerLink("c", 80.0, 80.0, 0.0),
        )
    )
    assert chain_layout(fleet, 1) == ((1, 2, 0),)
    assert chain_layout(fleet, 2) == ((1, 0), (2,))
    times = chain_worker_times_s(fleet, 0.01, 0.01, 1000.0, NO_OVERHEAD, 1.0, chains=1)
    assert times[1] == pytest.approx(star_unlimited_s(0.01, 100.0))  # the head: its downlink
    assert times[2] > star_unlimited_s(0.01, 5.0)  # behind b's 5 Mbit/s uplink
    assert chain_fleet_s(fleet, 0.01, 0.01, 1000.0, NO_OVERHEAD, 1.0, 1.0, 1) == max(times)


def test_latency_is_paid_once_per_hop_not_per_chunk() -> None:
    fleet = FleetLinks((WorkerLink("a", 100.0, 100.0, 100.0), WorkerLink("b", 100.0, 100.0, 50.0)))
    fast = chain_worker_times_s(fleet, 0.1, 0.1, 1000.0, NO_OVERHEAD, 1.0, chains=1)
    slow = chain_worker_times_s(uniform(2), 0.1, 0.1, 1000.0, NO_OVERHEAD, 1.0, chains=1)
    # head: trainer->a one way = 0.05 s; a->b one way = (0.1 + 0.05) / 2 = 0.075 s
    assert fast[0] - slow[0] == pytest.approx(0.05)
    assert fast[1] - slow[1] == pytest.approx(0.125)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"downlink_mbps": 0.0}, "downlink_mbps must be a positive"),
        ({"uplink_mbps": -1.0}, "uplink_mbps must be a positive"),
        ({"rtt_ms": float("nan")}, "rtt_ms must be a finite"),
    ],
)
def test_a_worker_link_refuses_impossible_values(fields: dict, match: str) -> None:
    base = {"name": "w", "downlink_mbps": 1.0, "uplink_mbps": 1.0, "rtt_ms": 1.0}
    with pytest.raises(UsageError, match=match):
        WorkerLink(**{**base, **fields})


def test_a_fleet_needs_workers_with_unique_names() -> None:
    with pytest.raises(UsageError, match="at least one worker"):
        FleetLinks(())
    with pytest.raises(UsageError, match="'w' appears twice"):
        FleetLinks((WorkerLink("w", 1, 1, 1), WorkerLink("w", 2, 2, 2)))


def test_the_batch_boundary_adds_to_every_topology_and_the_terms_sum_to_the_time() -> None:
    link = WorkerLink("a", downlink_mbps=80.0, uplink_mbps=20.0, rtt_ms=50.0)
    fetch = FetchModel(poll_interval_s=2.0, round_trips=4, install_mb_per_s=500.0)
    waiting = FetchModel(
        poll_interval_s=2.0, round_trips=4, install_mb_per_s=500.0, batch_wait_s=0.25
    )
    terms = object_storage_worker_terms(link, 0.1, 1.0, waiting)
    assert list(terms) == ["poll_s", "requests_s", "wire_s", "install_s", "batch_wait_s"]
    assert (terms["poll_s"], terms["install_s"], terms["batch_wait_s"]) == (1.0, 2.0, 0.25)
    assert sum(terms.values()) == object_storage_worker_s(link, 0.1, 1.0, waiting)
    before = object_storage_worker_s(link, 0.1, 1.0, fetch)
    assert object_storage_worker_s(link, 0.1, 1.0, waiting) == pytest.approx(before + 0.25)
    fleet = uniform(3, rtt_ms=10.0)
    star = star_fleet_s(fleet, 0.5, 1.0, 300.0, fetch)
    assert star_fleet_s(fleet, 0.5, 1.0, 300.0, waiting) == pytest.approx(star + 0.25)
    chain = chain_worker_times_s(fleet, 0.5, 1.0, 300.0, fetch, 64.0, chains=1)
    later = chain_worker_times_s(fleet, 0.5, 1.0, 300.0, waiting, 64.0, chains=1)
    assert later == pytest.approx([t + 0.25 for t in chain])
    with pytest.raises(UsageError, match="batch_wait_s"):
        FetchModel(batch_wait_s=-1.0)


class CountedName(str):
    """A worker name that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_checking_names_is_linear_in_the_fleet() -> None:
    """A 100,000-row fleet: comparing every name with every other is 10^10 steps (minutes)."""
    n = 2000
    CountedName.compared = 0
    FleetLinks(tuple(WorkerLink(CountedName(f"w{i}"), 1, 1, 1) for i in range(n)))
    assert CountedName.compared < 10 * n  # pairwise would be n * (n - 1): 4 million
