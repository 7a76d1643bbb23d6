"""The demo's report on the terminal, and its picture."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

SHOWN = 3  # versions printed at each end of a run's table; report.json has them all


def _mb(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.2f} MB" if n < 1e8 else f"{n / 1e6:,.0f} MB"


def _s(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def print_report(r: dict[str, Any]) -> None:
    for section in (_setup, _reward, _versions, _lever, _phases, _admission, _planner, _checks):
        print()
        section(r)


def _setup(r: dict[str, Any]) -> None:
    c, z, t = r["config"], r["sizes"], r["timing"]
    print("== wanrl-s3 demo: asynchronous RL through two regional buckets ==")
    print(
        f"learner: {z['policy_params']:,}-parameter transformer ({_mb(z['policy_bytes'])} bf16), "
        f"{len(r['steps'])} steps of {c['groups_per_step'] * c['group']} trajectories "
        f"({c['groups_per_step']} prompts x {c['group']}), kappa {c['kappa']}, S {c['staleness']}"
    )
    print(
        f"fleet: {c['workers']} worker processes, {c['workers_per_region']} per region "
        f"({', '.join(r['buckets'])}), polling every {c['poll_interval_s']} s; fanout publish"
    )
    print(
        f"large run: {z['large_params'] / 1e6:.0f}M parameters ({_mb(z['large_bytes'])} bf16), "
        f"{c['large_density']:.0%} of values moved per version"
    )
    cut = (
        f" (stopped at step {len(r['steps'])} of {c['steps']}: a busy machine, and the demo's "
        f"{c['max_train_s']:g} s cap)"
        if len(r["steps"]) < c["steps"]
        else ""
    )
    print(
        f"wall clock: {t['trained_at_s'] - t['started_at_s']:.0f} s of training{cut}, "
        f"{max(i['installed_at_s'] for i in r['installs']) - t['started_at_s']:.0f} s to the "
        "last install"
    )


def _reward(r: dict[str, Any]) -> None:
    steps = r["steps"]
    n = len(steps)
    marks = sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})
    line = "  ".join(f"step {steps[i]['step']}: {steps[i]['reward']:.2f}" for i in marks)
    print(f"reward (fraction of digits reversed correctly; 0.10 is chance): {line}")


def _versions(r: dict[str, Any]) -> None:
    for run, rows in r["versions"].items():
        fleet = {v["version"]: v for v in r["t_bcast"][run]["fleet"]["versions"]}
        kinds = Counter(v["kind"] for v in rows)
        full = [f"v{v['version']}" for v in rows if v["kind"] == "full"]
        if len(full) > 2 * SHOWN:
            full = [*full[:SHOWN], "...", *full[-2:]]
        print(
            f"{run} run: {len(rows)} versions, "
            + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            + (f" (full: {', '.join(full)})" if kinds["full"] < len(rows) else "")
        )
        print(
            f"  {'v':>4} {'kind':<5} {'stored':>10} {'changed':>8} {'as delta':>10} "
            f"{'encode s':>8} {'up+commit s':>11} {'T_bcast90 s':>11}  why"
        )
        shown = rows if len(rows) <= 2 * SHOWN else [*rows[:SHOWN], None, *rows[-SHOWN:]]
        for v in shown:
            if v is None:
                print(f"  {'...':>4} ({len(rows) - 2 * SHOWN} more in report.json)")
                continue
            spread = fleet.get(v["version"], {})
            print(
                f"  {v['version']:>4} {v['kind']:<5} {_mb(v['stored_bytes']):>10} "
                f"{_pct(v['changed_fraction']):>8} {_mb(v['delta_bytes']):>10} "
                f"{v['encode_s']:>8.2f} {v['upload_commit_s']:>11.2f} "
                f"{_s(spread.get('t_bcast_s')):>11}  {v['reason']}"
            )


def _lever(r: dict[str, Any]) -> None:
    print(
        "the delta lever (--delta auto ships a delta only under "
        f"{r['delta_lever']['policy']['auto_limit']:.0%} of a full snapshot):"
    )
    for run, d in r["delta_lever"].items():
        print(
            f"  {run}: {d['full']} full + {d['delta']} delta versions; median "
            f"{_pct(d['changed_fraction_median'])} of bf16 values changed per version, a delta "
            f"{_pct(d['delta_over_full_median'])} of the snapshot; workers downloaded "
            f"{_mb(d['downloaded_bytes'])} in all, against {_mb(d['downloaded_if_all_full_bytes'])}"
            " had every install been a full snapshot"
        )


def _phases(r: dict[str, Any]) -> None:
    print(
        "installs, median per worker (s): seen after publish / download / verify / install "
        "/ publish->installed"
    )
    for run, workers in r["phase_medians"].items():
        for w, m in workers.items():
            print(
                f"  {run:<6} {w:<10} {int(m['installs']):>3} installs: {m['seen_s']:.2f} / "
                f"{m['download_s']:.3f} / {m['verify_s']:.3f} / {m['install_s']:.3f} / "
                f"{m['total_s']:.2f}"
            )
    for run in r["t_bcast"]:
        per = r["t_bcast"][run]["per_region"]
        parts = []
        for region, rep in per.items():
            ts = [v["t_bcast_s"] for v in rep["versions"] if v["t_bcast_s"] is not None]
            parts.append(f"{region} median {_s(statistics.median(ts) if ts else None)} s")
        print(
            f"  T_bcast at 90% per region ({run}, as `wanrl-s3 status` prints): " + ", ".join(parts)
        )


def _admission(r: dict[str, Any]) -> None:
    t = r["trajectories"]
    print(
        f"trajectories: {t['sampled_by_workers']:,} sampled, {t['reached_learner']:,} reached "
        f"the learner, {t['admitted']:,} admitted, {t['dropped_at_put'] + t['dropped_at_get']:,} "
        f"dropped as too old ({t['dropped_at_put']:,} on arrival, {t['dropped_at_get']:,} while "
        f"queued), {t['pending_at_stop']:,} pending at stop"
    )
    hist = ", ".join(f"{k}: {v:,}" for k, v in t["admitted_by_age"].items())
    print(
        f"  admitted, by age in steps behind the learner (budget S = {t['budget']}): {hist}; "
        f"the {t['dropped_at_put'] + t['dropped_at_get']:,} dropped were older than {t['budget']}"
    )
    trained = ", ".join(f"{k}: {v:,}" for k, v in t["trained_ages"].items())
    print(f"  trained on, by age: {trained}")
    busy = [w["sample_s"] / (w["stopped_s"] - w["started_s"]) for w in r["workers"].values()]
    full = [w["blocked_s"] / (w["stopped_s"] - w["started_s"]) for w in r["workers"].values()]
    print(
        f"  workers spent {statistics.median(busy):.0%} of their time sampling and "
        f"{statistics.median(full):.0%} waiting on a full queue (medians); the queues hold half "
        "a step, so that what is trained on stays fresh"
    )


PHASE_LABELS = {
    "commit_to_seen": "commit->seen",
    "seen_to_first_byte": "seen->first byte",
    "download": "download",
    "verify_install": "verify+install",
    "batch_boundary": "batch boundary",
}


def _planner(r: dict[str, Any]) -> None:
    p = r["planner"]
    print(
        "the planner beside this run (the fleet model of `wanrl-s3 estimate --fleet` and the "
        "learner model, fed with what this run measured; docs/sizing-and-cost.md):"
    )
    for run in ("policy", "large"):
        _planner_run(run, p[run], r["config"]["workers"])
    if (
        "infeasible" in p["policy"]["capacity_rule"]
        and not p["learner"]["predicted"]["version_wait_s"]
    ):
        print(
            "  (the rule's gate holds for a learner kept busy: with enough workers its steps "
            "take T_train and the broadcast overruns them; this one waits for trajectories, "
            "and its longer steps give the broadcast the time, as the line below shows)"
        )
    _learner(p["learner"])
    _reference_8b(p["reference_8b"])


def _planner_run(run: str, p: dict[str, Any], workers: int) -> None:
    if "unavailable" in p["t_bcast"]:
        print(f"  {run} run: T_bcast at 90% not predicted: {p['t_bcast']['unavailable']}")
        return
    b, m = p["t_bcast"], p["t_bcast"]["model"]
    kind = "a delta" if m["delta"] else "a full version"
    verdict = "within 25%" if b["within_25_percent"] else "off by more than 25%"
    print(
        f"  {run} run, {kind} of {m['payload_gb'] * 1e3:.2f} MB: T_bcast at 90% predicted "
        f"{b['predicted_s']:.2f} s, measured median {b['measured_median_s']:.2f} s (max "
        f"{b['measured_max_s']:.2f} s): {b['ratio']:.2f}x, {verdict}"
    )
    links = m["workers"].values()
    for name, w in m["workers"].items():
        if w["probe_error"] or not w["probe_samples"]:
            print(
                f"    {name}: {w['probe_samples']} request round trips timed (a HEAD failed: "
                f"{w['probe_error']}); with none the model has 0 ms"
            )
    rtts = [w["link"]["rtt_ms"] for w in links]
    downs = [w["link"]["downlink_mbps"] for w in links]
    print(
        f"    fed: requests {min(rtts):.0f}-{max(rtts):.0f} ms (each worker's HEADs), "
        f"downlinks {min(downs):,.0f}-{max(downs):,.0f} Mbit/s, commit {m['commit_s']:.2f} s "
        f"(its requests split by region), poll {m['poll_interval_s']:g} s, verify+install and "
        f"batch boundary as measured"
    )
    pred, meas = b["phases_predicted_s"], b["phases_measured_s"]
    print(
        f"    {b['worker_at_90']}, at 90% in the model, per install, model / measured mean (s): "
        + ", ".join(f"{PHASE_LABELS[k]} {pred[k]:.2f}/{meas[k]:.2f}" for k in PHASE_LABELS)
        + f"; a version's 90% of {workers} workers {b['gaps_s']['spread']:+.2f} beyond "
        "this worker's mean"
    )
    for term in b["missing_terms"].values():
        asked = term.get("unpublished_numbers_asked_median")
        extra = "" if asked is None else f" ({asked:g} such numbers per delta, median)"
        print(f"    missing: +{term['measured_s']:.2f} s, {term['term']}{extra}")
    if b["missing_terms"]:
        print(
            f"    accounted for: the model's {b['predicted_s']:.2f} s, plus these, "
            f"{b['explained_s']:.2f} s; plus the smaller terms {b['other_gaps_s']:+.2f} s: "
            f"the measured {b['measured_median_s']:.2f} s"
        )
    rule = p["capacity_rule"]
    i = rule["inputs"]
    if "unavailable" in rule:
        print(f"    capacity rule: {rule['unavailable']}")
        return
    head = (
        f"    capacity rule, T_bcast {i['t_bcast_s']:.2f} s from the publish call, "
        f"{i['dropped_fraction']:.0%} dropped as too old: "
    )
    if "infeasible" in rule:
        print(head + rule["infeasible"])
    else:
        print(
            head + f"{rule['required_pool_rollouts_per_s']:,.0f} rollouts/s, "
            f"{rule['workers_needed']} workers needed (ran {i['workers']})"
        )


def _learner(p: dict[str, Any]) -> None:
    i, m = p["inputs"], p["predicted"]
    batch, queue = i["batch"], i["queue_rollouts"]
    version = (
        "no version timed at 90% of the fleet, so no wait for one modelled"
        if i["t_bcast_s"] is None
        else f"versions in time ({i['t_bcast_s']:.2f} s from the publish call, needed after "
        f"{m['version_deadline_s']:.2f} s)"
        if m["version_wait_s"] == 0
        else f"{m['version_wait_s']:.2f} s a publication waiting for the version "
        f"({i['t_bcast_s']:.2f} s from the publish call, needed after "
        f"{m['version_deadline_s']:.2f} s)"
    )
    print(
        f"  learner idle (one learner, sampling the policy run): predicted "
        f"{p['predicted_share']:.0%}, measured {p['measured_share']:.0%}; a step waits "
        f"{m['wait_per_step_s']:.2f} s predicted, {p['measured_wait_per_step_s']:.2f} s measured"
    )
    print(
        f"    why: the workers generate {i['pool_rollouts_per_s']:,.0f} rollouts/s while they "
        f"have room, {i['dropped_fraction']:.0%} of what reaches the learner is too old, so "
        f"{m['usable_rollouts_per_s']:,.0f}/s is usable; the queues bank at most {queue} "
        f"({m['banked_rollouts']:.0f} usable) of the {batch} a step takes while the learner "
        f"trains {i['t_train_s']:.2f} s, so it waits for the rest; {version}"
    )


def _reference_8b(b: dict[str, Any]) -> None:
    i = b["inputs"]
    print(
        f"planner at the reference 8B point (params {i['params']:.1e}, T_train {i['t_train_s']:.0f}"
        f" s, batch {i['batch']}, S {i['staleness']}, delta density {i['density']:.1%}):"
    )
    for row in b["rows"].values():  # every row the recommendation may name, as it names them
        egress = f"${row['egress_usd_per_publication']:,.2f}/pub"
        cost = f"${row['total_usd_per_step']:,.2f}/step"
        label = row["label"] if row["shipped"] else f"{row['label']} *"
        print(
            f"  {label:<21} payload {row['payload_gb']:7.2f} GB  T_bcast "
            f"{row['t_bcast_s']:7.0f} s  egress {egress:>11}  {cost:>12}  "
            f"workers {row['workers_needed'] or 'infeasible'}"
        )
    unshipped = [row["label"] for row in b["rows"].values() if not row["shipped"]]
    if unshipped:
        print(f"  * {', '.join(unshipped)}: modelled, not shipped by wanrl-s3; for comparison")
    print(f"  recommendation: {b['reason']} (prices as of {b['prices_as_of']})")


def _checks(r: dict[str, Any]) -> None:
    c = r["checks"]
    print(
        f"checks: {c['installs']} installs, {c['installs_not_matching_published_bits']} not "
        f"bit-identical to what the learner published; oldest trajectory trained on "
        f"{c['oldest_trained_age']} steps behind (budget {c['budget']}); "
        f"{c['policy_versions_reached_every_worker']} policy versions reached every worker: "
        + ("OK" if c["ok"] else "FAILED")
    )


def plot(r: dict[str, Any], path: Path) -> Path:
    """Reward per step above; each worker's installs over time below, one row per worker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = r["timing"]["started_at_s"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), gridspec_kw={"height_ratios": [1, 1]})
    steps = r["steps"]
    top.plot([s["step"] for s in steps], [s["reward"] for s in steps], color="tab:blue")
    top.axhline(0.1, color="grey", lw=0.8, ls=":", label="chance")
    top.set_xlabel("learner step")
    top.set_ylabel("mean reward of trained batch")
    top.set_title("reward per step (digits reversed correctly)")
    top.legend(loc="lower right")
    workers = sorted({i["worker"] for i in r["installs"]})
    for v in r["versions"]["policy"]:
        bottom.axvline(v["published_at_s"] - t0, color="0.85", lw=0.6, zorder=0)
    for row, w in enumerate(workers):
        for run, marker, dy in (("policy", "o", 0.12), ("large", "s", -0.12)):
            mine = [i for i in r["installs"] if i["worker"] == w and i["run"] == run]
            xs = [i["installed_at_s"] - t0 for i in mine]
            bottom.scatter(xs, [row + dy] * len(xs), marker=marker, s=12,
                           color="tab:blue" if run == "policy" else "tab:orange",
                           label=f"{run} install" if row == 0 else None)  # fmt: skip
            for i in mine[:: max(1, len(mine) // 8)]:
                bottom.annotate(f"v{i['version']}", (i["installed_at_s"] - t0, row + dy),
                                textcoords="offset points", xytext=(0, 5 if dy > 0 else -10),
                                fontsize=6, ha="center")  # fmt: skip
    bottom.set_yticks(range(len(workers)), workers)
    bottom.set_ylim(-0.6, len(workers) - 0.4)
    bottom.set_xlabel("seconds since the first publish (grey lines: policy versions published)")
    bottom.set_title("installs per worker over time")
    bottom.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
