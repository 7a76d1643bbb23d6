"""Bytes per publication and per run (wanrl_s3/cost/traffic.py) with coded full versions."""

from __future__ import annotations

import dataclasses

import pytest

from wanrl_s3.cost.inputs import PlanInputs
from wanrl_s3.cost.publication import TYPICAL_FULL_RATIO
from wanrl_s3.cost.traffic import traffic

R = TYPICAL_FULL_RATIO
PERIOD_S = 3000.0


def test_full_versions_move_and_occupy_r_times_the_raw_bytes(inputs_8b: PlanInputs) -> None:
    raw = dataclasses.replace(inputs_8b, regions=2)
    cod = dataclasses.replace(raw, full_ratio=R)
    for name in ("object_storage_full", "cdn_full"):
        (pub_raw, start_raw, kept_raw), (pub, start, kept) = (
            traffic(i, name, 7, PERIOD_S) for i in (raw, cod)
        )
        assert kept == pytest.approx(R * kept_raw) == pytest.approx(R * 2 * 2 * 16.4)
        assert start.inter_region_gb == pytest.approx(R * start_raw.inter_region_gb)
        assert pub.cdn_egress_gb + pub.storage_egress_gb == pytest.approx(
            R * (pub_raw.cdn_egress_gb + pub_raw.storage_egress_gb)
        )
    for name in ("star", "peer_chain"):
        (pub_raw, _, _), (pub, _, _) = (traffic(i, name, 7, PERIOD_S) for i in (raw, cod))
        assert pub.trainer_egress_gb == pytest.approx(R * pub_raw.trainer_egress_gb)
        assert pub.relay_egress_gb == pytest.approx(R * pub_raw.relay_egress_gb)


def test_deltas_keep_their_bytes_and_their_keyframes_shrink(inputs_8b: PlanInputs) -> None:
    """A trainer outside the bucket's cloud pays for every upload: the delta, a tenth of a
    keyframe per publication, and the initial full version the fleet starts from."""
    away = dataclasses.replace(inputs_8b, provider="r2", trainer_provider="aws", keyframe_every=10)
    for ratio in (1.0, R):
        i = dataclasses.replace(away, full_ratio=ratio)
        per_pub, start, kept = traffic(i, "object_storage_delta", 5, PERIOD_S)
        assert per_pub.trainer_egress_gb == pytest.approx(0.82 + ratio * 16.4 / 10)
        assert per_pub.storage_egress_gb == pytest.approx(5 * 0.82)  # workers pull the delta
        assert start.storage_egress_gb == pytest.approx(5 * ratio * 16.4)
        assert kept == pytest.approx(2 * ratio * 16.4 + 10 * 0.82)
