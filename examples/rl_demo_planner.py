"""The planner beside the run: its models, fed with what this run measured.

T_bcast at 90% comes from the fleet model that ``wanrl-s3 estimate --fleet``
uses (``wanrl_s3.cost.object_storage_worker_terms``), one WorkerLink per worker
built from that worker's own measurements: its request round trip to its bucket
(the HEADs its probe thread timed), its download rate (its largest download,
less one round trip), its verify + install time, the poll interval, and its
wait for a batch boundary. Each is a mean: the model adds its terms up, and
the mean of a sum is the sum of the means (a median would leave out the
installs that stalled). Status objects time a version from the manifest's stamp, so the
commit's requests come first: the publisher creates the manifest in every
region, then moves LATEST (a read, a compare-and-swap) region by region, and
the measured commit is split over those requests.

The learner's idle share comes from ``wanrl_s3.cost.learner_idle``: the pool's
measured rate, the share the staleness filter dropped, what the queues can bank
while the learner trains, and the broadcast from the publish call. The capacity
rule (``estimate``) gets the same inputs and says how many workers it would
size, or that the gate fires.

Where the prediction misses, the report does not guess why: at the worker the
model puts at 90%, it sets each phase's mean beside the model's term for it,
and a version's measured 90% beside that worker's mean install, so the gap is
accounted for in seconds, and the terms that make most of it are named.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rl_demo_report import FRACTION

from wanrl_s3 import InfeasiblePlanError, PlanInputs, estimate, load_prices
from wanrl_s3.cost import (
    FetchModel,
    WorkerLink,
    at_fraction_s,
    learner_idle,
    object_storage_worker_terms,
)

#: Requests in the commit per region: the manifest's create, LATEST's read and its swap.
COMMIT_REQUESTS_PER_REGION = 3
#: A term of the gap that exceeds this share of the measured T_bcast is named.
NAMED_SHARE = 0.05
#: Each phase of an install, and what the fleet model lacks there when the phase runs long.
PHASES = {
    "commit_to_seen": "commit -> seen: the commit and the poll, beyond their modelled requests",
    "seen_to_first_byte": "seen -> first byte: requests beyond the listing and the manifest: "
    "before a delta, the watcher prefetches the manifests between the keyframe and the "
    "target by number, 8 at a time, asking once for each number never published (the "
    "demo publishes every kappa-th)",
    "download": "download: slower than the worker's largest download ran",
    "verify_install": "verify + install, beyond what was fed in",
    "batch_boundary": "batch boundary, beyond the fleet's mean fed in",
}
SPREAD = (
    "spread at 90%: a version's 90% is its slowest workers' time for that version, whose "
    "poll phase and CPU waits fell late; the model takes each worker's mean"
)
#: The reference page's 8B operating point (tests/cost/operating_point.py), raw full snapshots.
REFERENCE_8B = {
    "params": 8.2e9, "t_train_s": 1500.0, "batch": 2048, "staleness": 3, "full_ratio": 1.0,
}  # fmt: skip


def _installs(report: Mapping[str, Any], run: str) -> list[Mapping[str, Any]]:
    """Installs of every version but the first (which the workers waited for at start-up)."""
    return [i for i in report["installs"] if i["run"] == run and i["version"] > 0]


def boundary_s(row: Mapping[str, Any]) -> float:
    """Verified in memory -> installed, less the install itself: waiting for a batch to end."""
    return row["total_s"] - row["seen_s"] - row["ready_s"] - row["install_s"]


# ------------------------------------------------------------------ measured inputs


def request_s(summary: Mapping[str, Any]) -> float:
    """The worker's request round trip: the mean of its probe's timed HEADs."""
    return statistics.mean(summary["request_s"]) if summary["request_s"] else 0.0


def downlink_mbps(rows: Sequence[Mapping[str, Any]], rtt_s: float) -> float:
    """The worker's largest download, bytes over seconds less one round trip (the model
    charges the payload GET's round trip itself), as ``--from-status`` reads it."""
    big = max(rows, key=lambda r: r["downloaded_bytes"])
    seconds = big["download_s"] - rtt_s
    return big["downloaded_bytes"] * 8e-6 / (seconds if seconds > 1e-3 else big["download_s"])


def _commits_s(report: Mapping[str, Any], run: str) -> dict[int, float]:
    """Per version after the first: seconds from its manifest's stamp until publish()
    returned (the commit: the publisher's clock at both ends)."""
    stamps = {int(v): at for v, at in report["t_bcast"][run]["stamped_at_s"].items()}
    return {
        v["version"]: v["published_at_s"] - stamps[v["version"]]
        for v in report["versions"][run][1:]
    }


def commit_s(report: Mapping[str, Any], run: str) -> float:
    """The mean commit, manifests and LATEST in every region."""
    return statistics.mean(_commits_s(report, run).values())


def commit_by_region(report: Mapping[str, Any], run: str) -> dict[str, float]:
    """When each region's LATEST moved after the stamp: the manifests first, then LATEST
    region by region, in the order the publisher was given its stores."""
    regions = list(report["buckets"])
    per_request = commit_s(report, run) / (COMMIT_REQUESTS_PER_REGION * len(regions))
    return {
        region: per_request * (len(regions) + (COMMIT_REQUESTS_PER_REGION - 1) * (r + 1))
        for r, region in enumerate(regions)
    }


def pool_rollouts_per_s(report: Mapping[str, Any], group: int) -> list[float]:
    """Each worker's rate while it had a policy and room to send: what it can generate."""
    return [
        s["groups"] * group / (s["stopped_s"] - s["started_s"] - s["blocked_s"] - s["unserved_s"])
        for s in report["workers"].values()
    ]


def dropped_fraction(report: Mapping[str, Any]) -> float:
    """The staleness filter's drops over what it decided on (pending items excluded)."""
    t = report["trajectories"]
    dropped = t["dropped_at_put"] + t["dropped_at_get"]
    return dropped / (dropped + t["admitted"])


def publish_s(report: Mapping[str, Any], run: str) -> float:
    """Mean seconds from the publish call to the manifest's stamp: the publisher's
    checks that the version is free, encoding and the upload."""
    commits = _commits_s(report, run)
    return statistics.mean(
        v["total_s"] - commits[v["version"]] for v in report["versions"][run][1:]
    )


# ------------------------------------------------------------------ T_bcast


def _payload(report: Mapping[str, Any], run: str) -> tuple[float, float, bool]:
    """(payload GB, snapshot GB, delta) of this run's typical version after the first."""
    later = report["versions"][run][1:]
    delta = sum(v["kind"] == "delta" for v in later) > len(later) / 2
    kind = "delta" if delta else "full"
    stored = statistics.median(v["stored_bytes"] for v in later if v["kind"] == kind)
    return stored / 1e9, report["versions"][run][0]["raw_bytes"] / 1e9, delta


def worker_model(report: Mapping[str, Any], run: str, poll_interval_s: float) -> dict[str, Any]:
    """Each worker's link from its own measurements, and the model's terms for its time."""
    payload_gb, snapshot_gb, delta = _payload(report, run)
    rows = _installs(report, run)
    fetch = FetchModel(
        poll_interval_s,
        batch_wait_s=statistics.mean(boundary_s(r) for r in rows),
        goodput_share=1.0,  # the rates are measured as payload bytes per second
    )
    commits = commit_by_region(report, run)
    workers: dict[str, Any] = {}
    for name, summary in sorted(report["workers"].items()):
        mine = [r for r in rows if r["worker"] == name]
        if not mine:  # installed nothing after the first version: nothing to feed the model
            continue
        rtt_s = request_s(summary)
        installing_s = statistics.mean(r["verify_s"] + r["install_s"] for r in mine)
        link = WorkerLink(
            name,
            downlink_mbps([r for r in report["installs"] if r["worker"] == name], rtt_s),
            1.0,  # a worker that only pulls sends nothing the model uses
            rtt_s * 1e3,
            summary["region"],
            install_mb_per_s=snapshot_gb * 1e3 / installing_s,
        )
        terms = object_storage_worker_terms(link, payload_gb, snapshot_gb, fetch, delta)
        workers[name] = {
            "probe_samples": len(summary["request_s"]),
            "probe_error": summary["probe_error"],  # the last HEAD that failed, if any
            "link": {k: getattr(link, k) for k in ("downlink_mbps", "rtt_ms", "region")},
            "install_mb_per_s": link.install_mb_per_s,
            "commit_s": commits[summary["region"]],
            "terms": terms,
            "predicted_s": commits[summary["region"]] + sum(terms.values()),
            "measured_mean_s": statistics.mean(r["total_s"] for r in mine),
        }
    return {
        "payload_gb": payload_gb,
        "snapshot_gb": snapshot_gb,
        "delta": delta,
        "poll_interval_s": poll_interval_s,
        "batch_wait_s": fetch.batch_wait_s,
        "commit_s": commit_s(report, run),
        "round_trips": fetch.round_trips,
        "workers": workers,
    }


def _phases_predicted(model: Mapping[str, Any], worker: Mapping[str, Any]) -> dict[str, float]:
    """One worker's modelled time regrouped by phase of an install.

    The round trips in sequence are the poll's (before the version is seen), the
    listing's and the manifest's (before the first payload byte), and the payload GET's.
    """
    t, rtt_s = worker["terms"], worker["link"]["rtt_ms"] / 1e3
    return {
        "commit_to_seen": worker["commit_s"] + t["poll_s"] + rtt_s,
        "seen_to_first_byte": (model["round_trips"] - 2) * rtt_s,
        "download": rtt_s + t["wire_s"],
        "verify_install": t["install_s"],
        "batch_boundary": t["batch_wait_s"],
    }


def _phases_measured(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each phase's mean over these installs: means add up to the mean install exactly."""
    return {
        "commit_to_seen": statistics.mean(r["seen_s"] for r in rows),
        "seen_to_first_byte": statistics.mean(
            r["ready_s"] - r["download_s"] - r["verify_s"] for r in rows
        ),
        "download": statistics.mean(r["download_s"] for r in rows),
        "verify_install": statistics.mean(r["verify_s"] + r["install_s"] for r in rows),
        "batch_boundary": statistics.mean(boundary_s(r) for r in rows),
    }


def t_bcast(report: Mapping[str, Any], run: str, poll_interval_s: float) -> dict[str, Any]:
    """T_bcast at 90% predicted by the fleet model beside the status objects' figure.

    The gap is split exactly, at the worker the model puts at 90%, into each
    phase's mean against the model's term for it, and the spread, a version's
    measured 90% (its slowest workers that version) against that worker's mean
    install. Terms above NAMED_SHARE of the measured figure are named.
    """
    model = worker_model(report, run, poll_interval_s)
    workers = model["workers"]
    fleet = report["t_bcast"][run]["fleet"]["versions"][1:]
    measured = [v["t_bcast_s"] for v in fleet if v["t_bcast_s"] is not None]
    if not (workers and measured):
        return {"predicted_s": None, "unavailable": "no version after the first reached 90%"}
    predicted = at_fraction_s([w["predicted_s"] for w in workers.values()], FRACTION)
    at_90 = next(name for name, w in sorted(workers.items()) if w["predicted_s"] == predicted)
    median = statistics.median(measured)
    mine = [r for r in _installs(report, run) if r["worker"] == at_90]
    phases_pred = _phases_predicted(model, workers[at_90])
    phases_meas = _phases_measured(mine)
    gaps = {p: phases_meas[p] - phases_pred[p] for p in PHASES}
    gaps["spread"] = median - statistics.mean(r["total_s"] for r in mine)
    details = {"seen_to_first_byte": unpublished_asked(report, run)}
    names = {**PHASES, "spread": SPREAD}
    missing = {p: g for p, g in gaps.items() if g > NAMED_SHARE * median}
    return {
        "predicted_s": predicted,
        "measured_median_s": median,
        "measured_max_s": max(measured),
        "ratio": predicted / median,
        "within_25_percent": abs(predicted / median - 1.0) <= 0.25,
        "worker_at_90": at_90,
        "phases_predicted_s": phases_pred,
        "phases_measured_s": phases_meas,
        "gaps_s": gaps,
        "missing_terms": {
            p: {"term": names[p], "measured_s": g, **details.get(p, {})} for p, g in missing.items()
        },
        "explained_s": predicted + sum(missing.values()),
        "other_gaps_s": sum(g for p, g in gaps.items() if p not in missing),
        "model": model,
    }


def unpublished_asked(report: Mapping[str, Any], run: str) -> dict[str, float]:
    """Per delta version, the numbers between its keyframe and it that were never
    published: what the watcher's manifest prefetch may ask for in vain, once each
    (median)."""
    versions = report["versions"][run]
    published = {v["version"] for v in versions}
    counts = []
    for v in versions[1:]:
        if v["kind"] == "delta":
            keyframe = max(
                w["version"]
                for w in versions
                if w["kind"] == "full" and w["version"] < v["version"]
            )
            counts.append(sum(n not in published for n in range(keyframe, v["version"])))
    return {"unpublished_numbers_asked_median": statistics.median(counts)} if counts else {}


# ------------------------------------------------------------------ the learner


def learner(
    report: Mapping[str, Any], cfg: Mapping[str, Any], queue_rollouts: int, bcast_s: float | None
) -> dict[str, Any]:
    """The learner's idle share from cost.learner_idle with this run's inputs, beside the
    share its steps measured. ``bcast_s``: the policy's, from the publish call to 90%
    (None when no version reached 90% of the fleet: no wait for versions is modelled)."""
    steps = report["steps"]
    t_train_s = statistics.mean(s["train_s"] for s in steps)
    rates = pool_rollouts_per_s(report, cfg["group"])
    d = dropped_fraction(report)
    idle = learner_idle(
        t_train_s,
        cfg["groups_per_step"] * cfg["group"],
        cfg["kappa"],
        cfg["staleness"],
        sum(rates),
        dropped_fraction=d,
        queue_rollouts=queue_rollouts,
        t_bcast_s=bcast_s or 0.0,
    )
    waits = [s["wait_s"] for s in steps]
    measured = sum(waits) / (sum(waits) + sum(s["train_s"] for s in steps))
    return {
        "inputs": {
            "t_train_s": t_train_s,
            "batch": cfg["groups_per_step"] * cfg["group"],
            "kappa": cfg["kappa"],
            "staleness": cfg["staleness"],
            "pool_rollouts_per_s": sum(rates),
            "worker_rollouts_per_s": rates,
            "dropped_fraction": d,
            "queue_rollouts": queue_rollouts,
            "t_bcast_s": bcast_s,
        },
        "predicted": idle.to_dict(),
        "predicted_share": idle.idle_share,
        "measured_share": measured,
        "measured_wait_per_step_s": statistics.mean(waits),
        "within_10_points": abs(idle.idle_share - measured) <= 0.10,
    }


# ------------------------------------------------------------------ the capacity rule


def capacity_rule(measured: Mapping[str, Any]) -> dict[str, Any]:
    """What ``estimate`` sizes with this run's inputs: the fleet, or the gate's message."""
    if measured["t_bcast_s"] is None:
        return {"inputs": dict(measured), "unavailable": "no T_bcast to size with"}
    fields = ("params", "t_train_s", "batch", "staleness", "density", "workers", "regions")
    inputs = PlanInputs(
        **{k: measured[k] for k in fields},
        worker_rollouts_per_s=measured["worker_rollouts_per_s"],
        downlink_mbps=measured["downlink_mbps"],
        uplink_mbps=measured["upload_mbps"],  # the publisher's link, both as the star's uplink
        upload_mbps=measured["upload_mbps"],  # and as its upload to the buckets
        poll_interval_s=measured["poll_interval_s"],
        t_bcast_s=measured["t_bcast_s"],
        dropped_fraction=measured["dropped_fraction"],
    )
    out: dict[str, Any] = {"inputs": dict(measured), "window_s": inputs.window_s}
    try:
        plan = estimate(inputs, load_prices())
    except InfeasiblePlanError as exc:
        return {**out, "infeasible": str(exc)}
    return {
        **out,
        "required_pool_rollouts_per_s": plan.required_pool_rollouts_per_s,
        "workers_needed": plan.workers_needed,
    }


def planner_8b(density: float) -> dict[str, Any]:
    """The reference 8B operating point: every row the plan prices, and its recommendation."""
    plan = estimate(PlanInputs(**REFERENCE_8B, density=density), load_prices())  # type: ignore[arg-type]
    rows = {
        row.name: {
            "label": row.label,
            "payload_gb": row.payload_gb,
            "t_bcast_s": row.t_bcast_s,
            "feasible": row.feasible,
            "workers_needed": row.workers_needed,
            "egress_usd_per_publication": row.egress_usd_per_publication,
            "total_usd_per_step": row.total_usd_per_step,
            "shipped": row.shipped,
        }
        for row in plan.by_topology
    }
    summary = plan.to_dict()
    return {
        "inputs": {**REFERENCE_8B, "density": density},
        "rows": rows,
        "recommended": summary["recommended"],
        "reason": summary["reason"],
        "prices_as_of": summary.get("prices_as_of"),
    }
