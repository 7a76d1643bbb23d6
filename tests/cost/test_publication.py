"""The trainer's publication and the coded size of full versions (wanrl_s3/cost/publication.py)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from wanrl_s3.cost.publication import (
    COMMIT_ROUND_TRIPS,
    TYPICAL_FULL_RATIO,
    TrainerUplink,
    require_full_ratio,
)
from wanrl_s3.errors import UsageError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_default_ratio_is_the_codecs_measured_figure() -> None:
    """TYPICAL_FULL_RATIO is the larger of the chosen codec's measured ratios, in its
    runs (every ``full.py (chosen)`` row) and on the benchmarks page's current table."""
    runs = (DOCS / "results" / "full_codec.md").read_text(encoding="utf-8")
    ratios = {float(m) for m in re.findall(r"^full\.py \(chosen\).*?\s(0\.\d+)\s", runs, re.M)}
    assert ratios and max(ratios) == TYPICAL_FULL_RATIO
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    section = page[page.index("## Full snapshots, losslessly") :]
    section = section[: section.index("\n## ", 1)]
    current = {float(m) for m in re.findall(r"^\| [^|]+ \| (0\.\d+) \|", section, re.M)}
    assert current and max(current) == TYPICAL_FULL_RATIO


def test_publish_is_the_balanced_upload_then_the_commit() -> None:
    one = TrainerUplink(ranks=1, per_rank_gbps=10.0, rtt_s=0.05)
    eight = TrainerUplink(ranks=8, per_rank_gbps=10.0, rtt_s=0.05)
    # 140 GB is 1.12e6 Mbit: 112 s at 10 Gbit/s, 14 s at 80; the commit is 3 requests.
    assert one.publish_s(140.0) == pytest.approx(112.0 + 0.15)
    assert eight.publish_s(140.0) == pytest.approx(14.0 + 0.15)
    assert eight.commit_s == COMMIT_ROUND_TRIPS * 0.05
    assert (one.publish_s(140.0) - one.commit_s) / (eight.publish_s(140.0) - eight.commit_s) == (
        pytest.approx(8.0)
    )
    # One copy per region bucket: three buckets take three times the upload.
    assert eight.publish_s(140.0, copies=3) - eight.commit_s == pytest.approx(42.0)
    assert eight.publish_s(0.0) == eight.commit_s


@pytest.mark.parametrize(
    "change",
    [
        {"ranks": 0},
        {"ranks": -2},
        {"ranks": 1.5},
        {"ranks": True},
        {"per_rank_gbps": 0.0},
        {"per_rank_gbps": -1.0},
        {"per_rank_gbps": math.nan},
        {"per_rank_gbps": math.inf},
        {"per_rank_gbps": "10"},
        {"rtt_s": -0.1},
    ],
)
def test_uplink_validates_on_creation(change: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        TrainerUplink(**{"ranks": 1, "per_rank_gbps": 10.0, **change})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.0001, 2, math.nan, math.inf, "0.7", None, True])
def test_full_ratio_is_in_zero_one(bad: object) -> None:
    with pytest.raises(UsageError, match="full_ratio"):
        require_full_ratio(bad)  # type: ignore[arg-type]


def test_full_ratio_accepts_the_edges_of_its_range() -> None:
    assert require_full_ratio(1) == 1.0 and require_full_ratio(1e-9) == 1e-9
