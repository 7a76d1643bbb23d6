"""benchmarks/fleet_sim.py on small fleets with fixed seeds, against cases computed by hand.

The simulator's figures at scale (docs/scale.md) are only worth what its parts are:
one worker on one link must take exactly the transfer time the model defines,
whatever the number of parts simulated per event; a rate-limited prefix must
never admit more than its limit, and so must stretch a burst to at least the time
its requests take at that rate; the calibration on the committed WAN runs must
stay within 10 %; a steady delta's readers (the workers the planner describes) must
leave out exactly the workers behind at its commit or down before they install it;
one seed must give each worker the same crashes on every route; bad input is one line
and exit status 2.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fleet_sim_calibrate import load_run, predict  # noqa: E402
from fleet_sim_model import FleetSim, Outcome, SimConfig, Version  # noqa: E402
from fleet_sim_report import t_bcast  # noqa: E402
from fleet_sim_store import Prefix  # noqa: E402

from wanrl_s3 import PublishConfig, UsageError, WatchConfig  # noqa: E402
from wanrl_s3.cost import FetchModel, FleetLinks, WorkerLink, at_fraction_s  # noqa: E402

MiB = 2**20
RUNS = ROOT / "docs" / "results" / "wan-fleet-2026-12-04"


def one_worker(batch_requests: int, seed: int = 3):
    link = WorkerLink("solo", downlink_mbps=80.0, uplink_mbps=20.0, rtt_ms=40.0, region="r")
    config = SimConfig(
        versions=(Version(1, "full", 40 * MiB), Version(2, "delta", 3 * MiB)),
        snapshot_bytes=100_000_000,
        cadence_s=120.0,
        watch=WatchConfig(poll_interval_s=5.0),
        fetch=FetchModel(5.0, install_mb_per_s=400.0, delta_install_mb_per_s=800.0),
        batch_requests=batch_requests,
        trainer_rtt_s=0.01,
        seed=seed,
    )
    return FleetSim(FleetLinks((link,)), config).run()


@pytest.mark.parametrize("batch_requests", [1, 3, 16])
def test_one_worker_one_link_takes_the_transfer_time(batch_requests: int) -> None:
    """After its poll reaches the bucket: the poll's answer (half a round trip), a listing
    and a manifest (two), the payload's first byte (one), the bytes at TCP's goodput,
    the install at its rate; exactly, for any number of parts per simulated event."""
    out = one_worker(batch_requests)
    rtt, goodput = 0.040, 80e6 / 8 * 1448 / 1514
    for version, nbytes, install_s in ((1, 40 * MiB, 100e6 / 400e6), (2, 3 * MiB, 100e6 / 800e6)):
        expected = rtt / 2 + 3 * rtt + nbytes / goodput + install_s
        seen, installed = out.seen_s[version][0], out.installed_s[version][0]
        assert installed - seen == pytest.approx(expected, abs=1e-9)
        # the poll that saw it came within one poll gap (a round trip, then 5 s +- 20 %)
        visible = out.stamps_s[version] + 3 * 0.01
        assert 0 <= seen - visible <= rtt + 5.0 * 1.2


def test_the_poll_phase_is_drawn_but_the_rest_is_the_same_for_every_seed() -> None:
    runs = [one_worker(16, seed) for seed in range(8)]
    seen = {round(o.seen_s[2][0] - o.stamps_s[2], 6) for o in runs}
    assert len(seen) == 8  # the phase is random
    spans = {round(o.installed_s[2][0] - o.seen_s[2][0], 9) for o in runs}
    assert len(spans) == 1


def test_a_prefix_admits_its_limit_per_window_and_refuses_the_rest() -> None:
    prefix = Prefix("p", limit_per_s=100.0, window_s=1.0, background_per_s=30.0)
    assert prefix.book(5.2, 5.2, 250) == 70  # 100 a second, 30 of them taken by polls
    assert prefix.book(5.9, 5.9, 10) == 0  # that second is full
    assert prefix.book(6.0, 6.0, 10) == 10
    assert prefix.book(7.0, 9.0, 200) == 140  # spread over two windows: 100 each, 70 free
    assert prefix.discrete_slowdowns == 180 + 10 + 60
    assert prefix.offered_per_s(10.0)[5] == 250 + 10 + 30
    unlimited = Prefix("q", limit_per_s=math.inf)
    assert unlimited.book(0.0, 0.0, 10**6) == 10**6


def burst(limit_per_s: float, batch_requests: int, payload_prefixes: int = 1):
    """200 workers holding the keyframe all fetch one 80 MiB delta (a listing, a manifest
    and ten 8 MiB GETs each) from one prefix; their polls (10 s) take 20/s of it."""
    rng = random.Random(5)
    links = tuple(
        WorkerLink(f"w{i}", rng.uniform(200, 1000), 100.0, rng.uniform(10, 60), "r")
        for i in range(200)
    )
    config = SimConfig(
        versions=(Version(1, "full", 800 * MiB), Version(2, "delta", 80 * MiB)),
        snapshot_bytes=1_000_000_000,
        cadence_s=30.0,
        watch=WatchConfig(poll_interval_s=10.0),
        fetch=FetchModel(10.0, install_mb_per_s=2000.0),
        read_limit_per_s=limit_per_s,
        payload_prefixes=payload_prefixes,
        batch_requests=batch_requests,
        start_held=True,
        trainer_rtt_s=0.0,
        seed=1,
    )
    return FleetSim(FleetLinks(links), config).run()


@pytest.mark.parametrize("batch_requests", [1, 16])
def test_a_rate_limited_prefix_stretches_a_burst_to_its_rate(batch_requests: int) -> None:
    """2,400 requests through the 80/s the polls leave take at least 2,400 / 80 = 30 s
    from the first poll that sees the version; without the limit the fleet is done
    within a poll interval and a few seconds. No window admits more than the limit."""
    limited, free = burst(100.0, batch_requests), burst(math.inf, batch_requests)
    start = min(limited.seen_s[2])
    assert max(limited.installed_s[2]) - start >= 2400 / 80 - 1.0
    assert max(free.installed_s[2]) - min(free.seen_s[2]) < 10 * 1.2 + 5
    prefix = limited.regions[0].base
    assert max(prefix.admitted_per_s(limited.end_s)) <= 100.0 + 1e-9
    assert limited.total("slowdowns") > 0 and free.total("slowdowns") == 0
    assert all(t < math.inf for t in limited.installed_s[2])  # every worker got there


def test_the_payload_is_dealt_over_prefixes_as_the_publisher_deals_it() -> None:
    """K = 2: the delta's two 64 MiB objects (eight 8 MiB GETs and two) lie under prefixes
    (2 + 0) mod 2 and (2 + 1) mod 2, as ``PublishConfig.payload_prefix`` puts them; each
    worker lists both, and the run's prefix keeps its listing and manifest. Unlimited, one
    prefix is offered at most 351 requests in a second and the busiest of two 244, so at
    300/s one prefix is refused and two are not, and finish as the unlimited store does."""
    assert [PublishConfig(payload_prefixes=2).payload_prefix(2, n) for n in (0, 1)] == [0, 1]
    free = burst(math.inf, 16, payload_prefixes=2)
    region = free.regions[0]
    assert [sum(p.offered_per_s(free.end_s)) for p in region.payload] == [200 * 9, 200 * 3]
    polls = region.base.background_per_s * math.ceil(free.end_s)
    assert sum(region.base.offered_per_s(free.end_s)) - polls == pytest.approx(200 * 2)
    one, two = burst(300.0, 16), burst(300.0, 16, payload_prefixes=2)
    assert one.total("slowdowns") > 0 and two.total("slowdowns") == 0
    assert two.installed_s[2] == pytest.approx(free.installed_s[2])


@pytest.mark.parametrize("path", sorted(RUNS.glob("*.json")), ids=lambda p: p.name)
def test_calibration_on_the_committed_wan_runs_is_within_ten_percent(path: Path) -> None:
    run = load_run(path, None, 1 if path.name.startswith("hosts2") else None)
    lines = predict(run, replications=20)
    assert {(x["topology"], x["kind"]) for x in lines} == {
        ("object_storage", "full"), ("object_storage", "delta"),
        ("peer_chain", "full"), ("peer_chain", "delta"),
    }  # fmt: skip
    for x in lines:
        assert 0.9 <= x["ratio"] <= 1.1, x


def test_calibration_refuses_inputs_that_do_not_reproduce_the_recorded_prediction() -> None:
    with pytest.raises(UsageError, match="--mib N"):
        load_run(RUNS / "x1-2003.json", 32 * MiB, None)
    with pytest.raises(UsageError, match="--chains N"):
        load_run(RUNS / "hosts2-1702.json", None, None)  # that run had one chain, not two


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fleet_sim.py"), *argv],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "many"], "not a number"),
        (["--down-mbit", "100", "10"], "low first"),
        (["--density", "2"], "at most 1"),
        (["--poll-interval-s", "-1"], "--poll-interval-s"),
        (["--route", "carrier-pigeon"], "--route"),
        (["--provider", "nimbus"], "unknown provider 'nimbus'"),
        (["--calibrate", "no/such/run.json"], "cannot read it"),
        (["--calibrate", "pyproject.toml"], "not JSON"),
        (["--fleet", "no/such/fleet.csv"], "cannot read --fleet"),
        (["--payload-prefixes", "0"], "--payload-prefixes"),
        (["--payload-prefixes", "300"], "payload_prefixes must be at most 256"),
        (["--throttled-retry", "never"], "--throttled-retry"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], says: str) -> None:
    done = run_cli(*argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("route", ["replicate", "relay"])
def test_a_replica_region_sees_a_version_after_its_lag(route: str) -> None:
    """The primary's workers see a version within a poll gap of its commit; a replica's
    only after the provider's replication (100 s, drawn 0.5-1.5x) or the relay's poll
    and copy (a 400 MB delta at 40 Mbit/s: 80 s)."""
    links = FleetLinks(
        tuple(WorkerLink(f"w{i}", 500.0, 100.0, 20.0, f"r{i % 2}") for i in range(20))
    )
    config = SimConfig(
        versions=(Version(1, "full", 8 * MiB), Version(2, "delta", 400_000_000)),
        snapshot_bytes=16 * MiB,
        route=route,
        cadence_s=60.0,
        watch=WatchConfig(poll_interval_s=2.0),
        replication_lag_s=100.0,
        relay_mbps=40.0,
        start_held=True,
        seed=2,
    )
    out = FleetSim(links, config).run()
    after = [t - out.stamps_s[2] for t in out.seen_s[2]]
    primary, replica = after[0::2], after[1::2]
    assert max(primary) <= 0.15 + 0.02 + 2.0 * 1.2 + 0.02
    assert min(replica) >= (50.0 if route == "replicate" else 80.0)
    assert all(t < math.inf for t in out.installed_s[2])


def test_a_steady_deltas_readers_leave_out_workers_behind_or_down_before_the_install() -> None:
    """Version 3's commit at 1000 s: worker 0 went down before it (back, holding 2: a
    reader), worker 2 still held the keyframe, worker 3 went down after it, worker 4 was
    down at it. Readers: 0 and 1; the others' count: 2 (4 is not counted at all)."""
    links = FleetLinks(tuple(WorkerLink(f"w{i}", 100.0, 50.0, 20.0, "r") for i in range(5)))
    config = SimConfig(
        versions=(Version(1, "full", 8 * MiB), Version(2, "delta", MiB), Version(3, "delta", MiB)),
        snapshot_bytes=16 * MiB,
        start_held=True,
    )
    inf = math.inf
    out = Outcome(
        config, links, ["r"], stamps_s={1: 0.0, 2: 500.0, 3: 1000.0},
        alive_at_commit={v: [True, True, True, True, v != 3] for v in (1, 2, 3)},
        installed_s={1: [0.0] * 5, 2: [520.0, 530.0, 900.0, 540.0, 550.0],
                     3: [1020.0, 1030.0, 1400.0, 1200.0, inf]},
        regions=[], counters={}, started_s={1: 0.0, 2: 499.0, 3: 999.0},
        held_at_commit={1: [0] * 5, 2: [1, 1, 0, 1, 1], 3: [2, 2, 1, 2, 2]},
        down_s=[[800.0], [], [100.0], [1050.0], [990.0]],
    )  # fmt: skip
    assert out.readers(3) == [True, True, False, False]
    assert out.readers(2) == [True, True, False, True, True]
    readers = t_bcast(out)["delta_steady_readers"]
    assert readers["others"] == pytest.approx((1 + 2) / 2)
    for q, f in (("p50", 0.5), ("p99", 0.99)):
        expect = (at_fraction_s([21.0, 31.0, 41.0, 51.0], f) + at_fraction_s([21.0, 31.0], f)) / 2
        assert readers[q] == pytest.approx(expect)
    assert t_bcast(out)["delta_steady"]["p99"] > readers["p99"]  # 401 s for version 3


def test_with_churn_a_steady_deltas_readers_are_the_workers_without_a_restart_or_keyframe() -> None:
    """Heavy churn on a warm fleet (a crash per worker every 3 minutes, half of the
    restarts a new host): a reader's time is a poll gap, four round trips, a 1 MiB delta
    and its install, under 5 s. Left out, and slower: workers that held the version
    before and went down after the commit (a 30 s restart), and workers that were still
    on the keyframe at the commit (500 MB at 100 Mbit/s: 42 s) and stayed up."""
    links = FleetLinks(tuple(WorkerLink(f"w{i}", 100.0, 50.0, 20.0, "r") for i in range(40)))
    config = SimConfig(
        versions=(
            Version(1, "full", 500_000_000),
            *(Version(v, "delta", MiB) for v in range(2, 7)),
        ),
        snapshot_bytes=1_000_000_000,
        cadence_s=60.0,
        watch=WatchConfig(poll_interval_s=2.0),
        fetch=FetchModel(2.0, install_mb_per_s=400.0, delta_install_mb_per_s=800.0),
        trainer_rtt_s=0.01,
        crash_per_hour=20.0,
        restart_s=30.0,
        replace_share=0.5,
        start_held=True,
        tail_s=600.0,
        seed=4,
    )
    out = FleetSim(links, config).run()
    down_after, behind = [], []
    for v in range(2, 7):
        stamp = out.stamps_s[v]
        alive = [i for i, a in enumerate(out.alive_at_commit[v]) if a]
        for i, read in zip(alive, out.readers(v), strict=True):
            t = out.installed_s[v][i] - stamp
            if read:
                assert t < 5.0, (v, i, t)
            elif out.held_at_commit[v][i] == v - 1:
                down_after.append(t)
            elif not any(stamp < d < out.installed_s[v][i] for d in out.down_s[i]):
                behind.append(t)
    assert down_after and min(down_after) >= 30.0
    assert behind and max(behind) > 30.0


def test_a_seed_gives_each_worker_the_same_crashes_on_every_route() -> None:
    """A worker's crashes, and which of them restart on a new host, come from a stream of
    their own: the routes draw the shared stream (poll phases, the relay's poll, lags) in
    different orders, and a route's figures must not move with its own crash draw."""
    links = FleetLinks(
        tuple(WorkerLink(f"w{i}", 200.0, 50.0, 20.0, f"r{i % 3}") for i in range(30))
    )
    lives = {}
    for route in ("bucket", "cdn", "relay"):
        config = SimConfig(
            versions=(Version(1, "full", 8 * MiB), *(Version(v, "delta", MiB) for v in (2, 3))),
            snapshot_bytes=16 * MiB,
            route=route,
            cadence_s=600.0,
            watch=WatchConfig(poll_interval_s=2.0),
            replication_lag_s=30.0,
            relay_mbps=40.0,
            crash_per_hour=10.0,
            restart_s=30.0,
            replace_share=0.5,
            start_held=True,
            seed=5,
        )
        out = FleetSim(links, config).run()
        lives[route] = (out.down_s, out.replaced_s)
    down, replaced = lives["bucket"]
    assert sum(len(d) >= 2 for d in down) >= 10 and any(replaced)  # second crashes, new hosts
    assert lives["cdn"] == lives["bucket"]
    assert lives["relay"] == lives["bucket"]
