"""Broadcast time per topology: the page's second executed block, its checks, and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wanrl_s3.cost.topology import (
    chain_count,
    chain_pipelined_s,
    object_storage_s,
    payload_gb,
    snapshot_gb,
    star_limited_s,
    star_unlimited_s,
)
from wanrl_s3.errors import UsageError

from .operating_point import BW_MBPS, PARAMS_8B

# The page's "Executed output" of broadcast_topology.py, verbatim.
PAGE_OUTPUT = """\
snapshot 16.4 GB, per-worker downlink 100 Mbps
floor (star-unlimited)  = 1312 s   <- no topology beats this
source's measured T_bcast = 1437 s (+10% over the floor)

 N   star-limited(300M)  star-limited(800M)  chains(300M)  chains(800M)
 4                1749                1312          1317          1312
 6                2624                1312          1317          1312
 9                3936                1476          1322          1317
20                8747                3280          1343          1322

at N=20, B0=300 Mbps: star 8747 s vs chains 1343 s (6.5x)
payload  100% of snapshot -> floor   1312 s
payload    5% of snapshot -> floor     66 s
payload    1% of snapshot -> floor     13 s"""

SNAP_GB = snapshot_gb(PARAMS_8B)


def _reproduce_page_output() -> str:
    floor = star_unlimited_s(SNAP_GB, BW_MBPS)
    lines = [
        f"snapshot {SNAP_GB:.1f} GB, per-worker downlink {BW_MBPS:.0f} Mbps",
        f"floor (star-unlimited)  = {floor:.0f} s   <- no topology beats this",
        f"source's measured T_bcast = 1437 s ({100 * (1437 / floor - 1):+.0f}% over the floor)",
        "",
        " N   star-limited(300M)  star-limited(800M)  chains(300M)  chains(800M)",
    ]
    for n in (4, 6, 9, 20):
        lines.append(
            f"{n:>2}   {star_limited_s(SNAP_GB, 300, BW_MBPS, n):>17.0f}"
            f"   {star_limited_s(SNAP_GB, 800, BW_MBPS, n):>17.0f}"
            f"   {chain_pipelined_s(SNAP_GB, 300, BW_MBPS, n):>11.0f}"
            f"   {chain_pipelined_s(SNAP_GB, 800, BW_MBPS, n):>11.0f}"
        )
    star, chain = (
        star_limited_s(SNAP_GB, 300, BW_MBPS, 20),
        chain_pipelined_s(SNAP_GB, 300, BW_MBPS, 20),
    )
    lines += [
        "",
        f"at N=20, B0=300 Mbps: star {star:.0f} s vs chains {chain:.0f} s ({star / chain:.1f}x)",
    ]
    for density in (1.0, 0.05, 0.01):
        t = star_unlimited_s(payload_gb(PARAMS_8B, 2, density), BW_MBPS)
        lines.append(f"payload {density:>5.0%} of snapshot -> floor {t:>6.0f} s")
    return "\n".join(lines)


def test_reproduces_the_page_output_exactly() -> None:
    assert _reproduce_page_output() == PAGE_OUTPUT


def test_topologies_agree_while_the_uplink_is_not_binding() -> None:
    floor = star_unlimited_s(SNAP_GB, BW_MBPS)
    assert star_limited_s(SNAP_GB, 800, BW_MBPS, 4) == floor
    assert math.isclose(chain_pipelined_s(SNAP_GB, 800, BW_MBPS, 4), floor)


@pytest.mark.parametrize("n", [1, 9, 100])
@pytest.mark.parametrize("b0", [300, 800, 10_000])
def test_chains_never_go_below_the_floor(n: int, b0: int) -> None:
    assert chain_pipelined_s(SNAP_GB, b0, BW_MBPS, n) >= star_unlimited_s(SNAP_GB, BW_MBPS) - 1e-9


def test_star_degrades_linearly_and_chains_stay_near_flat() -> None:
    star, chain = (
        star_limited_s(SNAP_GB, 300, BW_MBPS, 20),
        chain_pipelined_s(SNAP_GB, 300, BW_MBPS, 20),
    )
    assert star / chain > 5


def test_only_fewer_bytes_move_the_floor() -> None:
    full = star_unlimited_s(SNAP_GB, BW_MBPS)
    assert star_unlimited_s(payload_gb(PARAMS_8B, 2, 0.01), BW_MBPS) < 0.02 * full


def test_chain_fill_uses_no_chunk_larger_than_the_payload() -> None:
    tiny_gb = 0.010  # a 10 MB delta through 64 MB chunks: fill is one payload per hop
    assert chain_pipelined_s(tiny_gb, 100, 100, 3) == pytest.approx(3 * tiny_gb * 8000 / 100)


def test_object_storage_uploads_once_per_region_or_once_plus_lag() -> None:
    one_region = object_storage_s(SNAP_GB, BW_MBPS, 300)
    assert one_region == pytest.approx(SNAP_GB * 8000 / 300 + SNAP_GB * 8000 / BW_MBPS)
    three = object_storage_s(SNAP_GB, BW_MBPS, 300, regions=3)
    assert three - one_region == pytest.approx(2 * SNAP_GB * 8000 / 300)
    replicated = object_storage_s(
        SNAP_GB, BW_MBPS, 300, regions=3, replicate=True, replication_lag_s=60
    )
    assert replicated == pytest.approx(one_region + 60)


def test_chain_count_is_at_least_one() -> None:
    assert chain_count(300, 100) == 3
    assert chain_count(50, 100) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda: snapshot_gb(0),
        lambda: payload_gb(PARAMS_8B, 2, 0.0),
        lambda: payload_gb(PARAMS_8B, 2, 1.5),
        lambda: star_limited_s(1.0, 300, 100, 0),
        lambda: star_unlimited_s(1.0, 0),
        lambda: chain_pipelined_s(1.0, 300, 100, 3, chunk_mb=0),
        lambda: object_storage_s(1.0, 100, 300, regions=0),
    ],
)
def test_bad_inputs_are_usage_errors(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError):
        call()


# ---------------------------------------------------------------- properties

sizes = st.floats(min_value=1e-6, max_value=1e5, allow_nan=False)
rates = st.floats(min_value=0.1, max_value=1e5, allow_nan=False)
fleets = st.integers(min_value=1, max_value=100_000)


@given(sizes, rates, rates, rates, fleets, st.floats(0.1, 1e3), st.integers(1, 8), st.booleans())
def test_no_topology_beats_the_floor(
    payload: float,
    uplink: float,
    downlink: float,
    upload: float,
    n: int,
    chunk: float,
    regions: int,
    replicate: bool,
) -> None:
    floor = star_unlimited_s(payload, downlink)
    assert star_limited_s(payload, uplink, downlink, n) >= floor
    assert chain_pipelined_s(payload, uplink, downlink, n, chunk) >= floor
    assert object_storage_s(payload, downlink, upload, regions, replicate) >= floor


@given(sizes, rates, rates, fleets, fleets)
def test_more_workers_never_lower_star_limited_time(
    payload: float, uplink: float, downlink: float, a: int, b: int
) -> None:
    few, many = sorted((a, b))
    assert star_limited_s(payload, uplink, downlink, few) <= star_limited_s(
        payload, uplink, downlink, many
    )
