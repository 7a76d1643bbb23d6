"""The demo's report: what happened, measured (rl_demo_planner sets the planner beside it).

Everything here reads what the run left behind: the learner's records, the
workers' install events, and the workers' status objects in the buckets. T_bcast
per version comes from the status objects through ``fleet_report``, exactly as
``wanrl-s3 status`` computes it; the fleet-wide figure merges both regions'
buckets, and the per-region figures are what ``wanrl-s3 status --store`` on that
region's URL prints.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from wanrl_s3 import ObjectStore, Subscriber, fleet_report, read_statuses

FRACTION = 0.9


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


# ------------------------------------------------------------------ T_bcast


def t_bcast(stores: Mapping[str, ObjectStore]) -> dict[str, Any]:
    """One run's T_bcast at 90% per version, fleet-wide and per region, from the buckets."""
    primary = next(iter(stores.values()))
    with Subscriber(primary) as sub:
        latest = sub.latest()
        published = {v: sub.manifest(v).created_at_s for v in sub.versions()}
    newest = None if latest is None else latest.version
    per_region = {
        region: fleet_report(read_statuses(store), published, newest, FRACTION).to_dict()
        for region, store in stores.items()
    }
    statuses = [s for store in stores.values() for s in read_statuses(store)]
    fleet = fleet_report(statuses, published, newest, FRACTION).to_dict()
    return {"fleet": fleet, "per_region": per_region, "stamped_at_s": published}


def reached_all(fleet: Mapping[str, Any]) -> list[int]:
    """Versions every worker installed (or passed)."""
    return [v["version"] for v in fleet["versions"] if v["installed"] == v["workers"] > 0]


# ------------------------------------------------------------------ installs


def install_phases(installs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each install's phases, seconds: seen after publish, download, verify, ready, install."""
    rows = []
    for e in installs:
        rows.append(
            {
                "run": e["run"],
                "worker": e["worker"],
                "region": e["region"],
                "version": e["version"],
                "path": e["path"],
                "downloaded_bytes": e["downloaded_bytes"],
                "seen_s": e["seen_at_s"] - e["published_at_s"],
                "download_s": e["download_s"],
                "verify_s": e["verify_s"],
                "ready_s": e["ready_at_s"] - e["seen_at_s"],
                "install_s": e["apply_s"],
                "total_s": e["installed_at_s"] - e["published_at_s"],
                "installed_at_s": e["installed_at_s"],
                "digest_ok": e["digest_ok"],
            }
        )
    return rows


def phase_medians(rows: Sequence[Mapping[str, Any]], run: str) -> dict[str, dict[str, float]]:
    """Per worker, the median of each phase over its installs of ``run``."""
    out: dict[str, dict[str, float]] = {}
    for worker in sorted({r["worker"] for r in rows if r["run"] == run}):
        mine = [r for r in rows if r["run"] == run and r["worker"] == worker]
        out[worker] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("seen_s", "download_s", "verify_s", "install_s", "total_s")
        }
        out[worker]["installs"] = len(mine)
    return out


# ------------------------------------------------------------------ trajectories


def trajectories(
    snapshot: Mapping[str, float], summaries: Mapping[str, Mapping[str, Any]], group: int
) -> dict[str, Any]:
    """Generated against admitted, in trajectories (each queue item is one group)."""
    stat = {k.split("/", 1)[1]: v for k, v in snapshot.items()}
    hist = {  # admissions by age; age_hist/over counts the drops, reported as such below
        k.split("/", 1)[1]: int(v) * group
        for k, v in stat.items()
        if k.startswith("age_hist/") and k != "age_hist/over"
    }
    sampled = sum(int(s["groups"]) for s in summaries.values()) * group
    return {
        "sampled_by_workers": sampled,
        "reached_learner": int(stat["generated"]) * group,
        "admitted": int(stat["admitted"]) * group,
        "dropped_at_put": int(stat["dropped_at_put"]) * group,
        "dropped_at_get": int(stat["dropped_at_get"]) * group,
        "pending_at_stop": int(stat["pending"]) * group,
        "admitted_by_age": hist,
        "budget": int(stat["budget"]),
    }


def trained_ages(steps: Sequence[Any], group: int) -> dict[int, int]:
    total: Counter[int] = Counter()
    for s in steps:
        for age, n in s.ages.items():
            total[age] += n * group
    return dict(sorted(total.items()))


def _median_of(values: Sequence[float | None]) -> float | None:
    return _median([v for v in values if v is not None])


# ------------------------------------------------------------------ the delta lever


def delta_lever(
    versions: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], limit: float
) -> dict[str, Any]:
    """What deltas did for one run: kinds, densities, and the bytes every worker moved."""
    later = versions[1:]
    full_bytes = versions[0]["raw_bytes"]
    moved = sum(r["downloaded_bytes"] for r in rows)
    return {
        "versions": len(versions),
        "full": sum(v["kind"] == "full" for v in versions),
        "delta": sum(v["kind"] == "delta" for v in versions),
        "changed_fraction_median": _median_of([v["changed_fraction"] for v in later]),
        "delta_over_full_median": _median_of(
            [v["delta_bytes"] / v["raw_bytes"] for v in later if v["delta_bytes"] is not None]
        ),
        "snapshot_bytes": full_bytes,
        "downloaded_bytes": moved,
        "downloaded_if_all_full_bytes": len(rows) * full_bytes,
        "auto_limit": limit,
    }
