"""The demo's asynchronous RL loop, at a reduced size, against a real S3 server (SeaweedFS).

One run (module fixture): two worker processes, one per region, a smaller
transformer, a few steps. The assertions are the demo's invariants, checked
against the buckets themselves rather than against the demo's own summary:
every install bit-identical to what the learner published, nothing older than
the budget trained on, every worker at the last version of both runs, and the
report's T_bcast equal to what ``wanrl-s3 status`` computes from the status
objects.
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import demo  # noqa: E402
import rl_demo_planner  # noqa: E402
import rl_demo_render  # noqa: E402
from rl_demo_policy import TaskConfig  # noqa: E402

from wanrl_s3 import Subscriber, fleet_report, open_store, read_statuses  # noqa: E402
from wanrl_s3.cli import main as cli_main  # noqa: E402
from wanrl_s3.cost import (  # noqa: E402
    FetchModel,
    WorkerLink,
    at_fraction_s,
    learner_idle,
    object_storage_worker_s,
)
from wanrl_s3.cost.inputs import LABELS  # noqa: E402

CONFIG = demo.DemoConfig(
    steps=8,
    kappa=2,
    groups_per_step=8,
    group=4,
    task=TaskConfig(length=4, d_model=32, layers=1, heads=2),
    workers_per_region=1,
    large_preset="tiny",
    large_layers=2,
    large_keyframe_every=3,
    poll_interval_s=0.1,
    large_poll_interval_s=0.1,
    settle_s=60.0,
)


@pytest.fixture(scope="module")
def report(s3_endpoint: str) -> dict[str, Any]:
    return demo.run_demo(CONFIG, s3_endpoint, demo.Progress(quiet=True))


def _stores(report: dict[str, Any], run: str, endpoint: str) -> dict[str, Any]:
    return {
        region: open_store(urls[run], endpoint_url=endpoint)
        for region, urls in report["buckets"].items()
    }


def test_every_install_is_bit_identical_to_what_was_published(report: dict[str, Any]) -> None:
    installs = report["installs"]
    assert installs, "no worker installed anything"
    assert all(i["digest_ok"] for i in installs)
    assert report["checks"]["installs_not_matching_published_bits"] == 0
    published = {(r, v["version"]) for r, vs in report["versions"].items() for v in vs}
    assert {(i["run"], i["version"]) for i in installs} <= published


def test_nothing_older_than_the_budget_is_trained_on(report: dict[str, Any]) -> None:
    budget = CONFIG.kappa + 1
    assert len(report["steps"]) == CONFIG.steps
    for step in report["steps"]:
        assert sum(step["ages"].values()) == CONFIG.groups_per_step
        assert max(step["ages"]) <= budget
    t = report["trajectories"]
    batch = CONFIG.groups_per_step * CONFIG.group
    assert t["admitted"] == CONFIG.steps * batch
    assert sum(t["admitted_by_age"].values()) == t["admitted"]
    assert sorted(t["admitted_by_age"], key=int) == [str(a) for a in range(t["budget"] + 1)]
    assert t["reached_learner"] == (
        t["admitted"] + t["dropped_at_put"] + t["dropped_at_get"] + t["pending_at_stop"]
    )
    assert report["checks"]["ok"]


def test_every_worker_reaches_the_last_version(report: dict[str, Any], s3_endpoint: str) -> None:
    for run, versions in report["versions"].items():
        last = versions[-1]["version"]
        assert last == CONFIG.steps
        statuses = [
            s for store in _stores(report, run, s3_endpoint).values() for s in read_statuses(store)
        ]
        assert len(statuses) == CONFIG.workers
        assert {s.installed_version for s in statuses} == {last}


def test_versions_in_the_report_are_the_manifests_in_the_bucket(
    report: dict[str, Any], s3_endpoint: str
) -> None:
    for run, versions in report["versions"].items():
        for store in _stores(report, run, s3_endpoint).values():
            with Subscriber(store) as sub:
                assert sub.versions() == [v["version"] for v in versions]
                for v in versions:
                    m = sub.manifest(v["version"])
                    assert (m.kind, m.stored_bytes, m.raw_bytes) == (
                        v["kind"],
                        v["stored_bytes"],
                        v["raw_bytes"],
                    )


def test_auto_ships_full_where_a_delta_would_not_pay(report: dict[str, Any]) -> None:
    for run, versions in report["versions"].items():
        for v in versions[1:]:
            if v["kind"] == "delta":
                assert v["stored_bytes"] <= 0.5 * v["raw_bytes"]
            elif "auto ships deltas under" in v["reason"]:
                assert v["delta_bytes"] > 0.5 * v["raw_bytes"], (run, v)
    lever = report["delta_lever"]["large"]
    assert lever["delta"] >= 1  # 1% nudges of the large run do go out as deltas
    assert lever["downloaded_bytes"] < lever["downloaded_if_all_full_bytes"]


def test_t_bcast_matches_the_status_objects(report: dict[str, Any], s3_endpoint: str) -> None:
    for run in report["versions"]:
        stores = _stores(report, run, s3_endpoint)
        statuses = [s for store in stores.values() for s in read_statuses(store)]
        with Subscriber(next(iter(stores.values()))) as sub:
            published = {v: sub.manifest(v).created_at_s for v in sub.versions()}
            latest = sub.latest()
        assert latest is not None
        fleet = fleet_report(statuses, published, latest.version, 0.9).to_dict()
        assert fleet["versions"] == report["t_bcast"][run]["fleet"]["versions"]
        assert all(v["t_bcast_s"] is not None for v in fleet["versions"][-1:])


def test_per_region_t_bcast_is_what_wanrl_s3_status_prints(
    report: dict[str, Any], s3_endpoint: str, capsys: Any
) -> None:
    for run in report["versions"]:
        for region, urls in report["buckets"].items():
            capsys.readouterr()
            argv = ["status", "--store", urls[run], "--endpoint-url", s3_endpoint]
            assert cli_main([*argv, "--last", "1000", "--json"]) == 0
            cli = json.loads(capsys.readouterr().out)
            mine = report["t_bcast"][run]["per_region"][region]
            assert [(v["version"], v["t_bcast_s"]) for v in cli["versions"]] == [
                (v["version"], v["t_bcast_s"]) for v in mine["versions"]
            ]


def test_report_prints_and_plots(report: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    png = rl_demo_render.plot(report, tmp_path / "demo.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rl_demo_render.print_report(report)
    out = capsys.readouterr().out
    assert "checks:" in out and "OK" in out
    assert "reference 8B point" in out
    json.dumps(report)  # the JSON report is plain data


def test_the_report_names_the_full_versions_and_keeps_drops_out_of_the_ages(
    report: dict[str, Any], capsys: Any
) -> None:
    """Keyframes land every keyframe_every-th publication, not version number; and a drop
    is not an admission age."""
    rl_demo_render.print_report(report)
    out = capsys.readouterr().out
    large = report["versions"]["large"]
    full = [v["version"] for v in large if v["kind"] == "full"]
    assert full[0] == 0 and len(full) < len(large)  # the first version; deltas after it
    assert f"(full: {', '.join(f'v{n}' for n in full)})" in out
    published = [v["version"] for v in large]
    for v in large[1:]:
        if v["reason"].startswith("scheduled keyframe"):
            since = max(n for n in full if n < v["version"])
            count = published.index(v["version"]) - published.index(since)
            assert v["reason"].startswith(
                f"scheduled keyframe: {count} publications after the full v{since} "
            )
            assert count == CONFIG.large_keyframe_every
    ages = next(line for line in out.splitlines() if "admitted, by age" in line)
    t = report["trajectories"]
    assert "over" not in ages
    assert f"the {t['dropped_at_put'] + t['dropped_at_get']:,} dropped were older than" in ages


def test_checks_fail_on_a_bad_install_or_a_too_old_trajectory(report: dict[str, Any]) -> None:
    bad_bits = {**report, "installs": [{**report["installs"][0], "digest_ok": False}]}
    assert not demo._checks(CONFIG, bad_bits)["ok"]
    too_old = {**report, "steps": [{**report["steps"][0], "ages": {CONFIG.kappa + 2: 1}}]}
    assert not demo._checks(CONFIG, too_old)["ok"]


def test_every_worker_timed_its_requests(report: dict[str, Any]) -> None:
    for summary in report["workers"].values():
        assert summary["probe_error"] is None
        assert summary["request_s"] and all(0 < s < 60 for s in summary["request_s"])


def test_the_planner_predicts_t_bcast_from_what_each_worker_measured(
    report: dict[str, Any],
) -> None:
    """Recomputed here from the run's own records: the fleet model per worker, the commit
    first, T_bcast at the 90% worker; and the gap split into phases adds up exactly."""
    polls = {"policy": CONFIG.poll_interval_s, "large": CONFIG.large_poll_interval_s}
    for run, poll_s in polls.items():
        b = report["planner"][run]["t_bcast"]
        m = b["model"]
        rows = [i for i in report["installs"] if i["run"] == run and i["version"] > 0]
        boundary = [r["total_s"] - r["seen_s"] - r["ready_s"] - r["install_s"] for r in rows]
        fetch = FetchModel(poll_s, batch_wait_s=statistics.mean(boundary), goodput_share=1.0)
        times = []
        for name, w in m["workers"].items():
            summary = report["workers"][name]
            rtt_ms = 1e3 * statistics.mean(summary["request_s"])  # the probe's mean
            assert w["link"]["rtt_ms"] == pytest.approx(rtt_ms)
            link = WorkerLink(
                name, w["link"]["downlink_mbps"], 1.0, w["link"]["rtt_ms"],
                install_mb_per_s=w["install_mb_per_s"],
            )  # fmt: skip
            worker_s = object_storage_worker_s(
                link, m["payload_gb"], m["snapshot_gb"], fetch, m["delta"]
            )
            times.append(w["commit_s"] + worker_s)
        assert b["predicted_s"] == pytest.approx(at_fraction_s(times, 0.9))
        assert sum(b["gaps_s"].values()) == pytest.approx(b["measured_median_s"] - b["predicted_s"])
        assert b["within_25_percent"] == (abs(b["ratio"] - 1) <= 0.25)
        share = rl_demo_planner.NAMED_SHARE
        named = {p for p, g in b["gaps_s"].items() if g > share * b["measured_median_s"]}
        assert set(b["missing_terms"]) == named
        assert b["explained_s"] + b["other_gaps_s"] == pytest.approx(b["measured_median_s"])


def test_the_learner_idle_prediction_is_the_model_fed_the_runs_counts(
    report: dict[str, Any],
) -> None:
    p = report["planner"]["learner"]
    i = p["inputs"]
    t = report["trajectories"]
    dropped = t["dropped_at_put"] + t["dropped_at_get"]
    assert i["dropped_fraction"] == dropped / (dropped + t["admitted"])
    assert i["queue_rollouts"] == CONFIG.queue_rollouts
    assert i["pool_rollouts_per_s"] == pytest.approx(sum(i["worker_rollouts_per_s"]))
    again = learner_idle(
        i["t_train_s"], i["batch"], i["kappa"], i["staleness"], i["pool_rollouts_per_s"],
        dropped_fraction=i["dropped_fraction"], queue_rollouts=i["queue_rollouts"],
        t_bcast_s=i["t_bcast_s"],
    )  # fmt: skip
    assert p["predicted_share"] == again.idle_share
    waits = [s["wait_s"] for s in report["steps"]]
    assert p["measured_share"] == pytest.approx(
        sum(waits) / (sum(waits) + sum(s["train_s"] for s in report["steps"]))
    )
    for run in ("policy", "large"):  # one learner: both runs carry its figures
        idle = report["planner"][run]["learner_idle"]
        assert (idle["predicted_share"], idle["measured_share"]) == (
            p["predicted_share"],
            p["measured_share"],
        )


def test_the_report_explains_the_idle_line_and_names_what_it_recommends(
    report: dict[str, Any], capsys: Any
) -> None:
    rl_demo_render.print_report(report)
    out = capsys.readouterr().out
    assert "learner idle (one learner" in out and "    why: the workers generate" in out
    reference = out[out.index("planner at the reference 8B point") :]
    table, reason = reference.split("  recommendation: ", 1)
    rows = [line for line in table.splitlines()[1:] if not line.startswith("  * ")]
    shown = [line[2:23].rstrip().removesuffix(" *") for line in rows]
    named = [label for label in LABELS.values() if label in reason.split(" (prices")[0]]
    assert named and set(named) <= set(shown)
    starred = [line[2:23].rstrip() for line in rows if line[2:23].rstrip().endswith(" *")]
    assert starred == ["star *", "peer chain *"]  # modelled, not shipped: said, not ranked
    assert "  * star, peer chain: modelled, not shipped by wanrl-s3" in reference


def test_a_run_whose_versions_never_reached_90_percent_or_whose_probe_failed_reports(
    report: dict[str, Any], capsys: Any
) -> None:
    broken = copy.deepcopy(report)
    for v in broken["t_bcast"]["large"]["fleet"]["versions"]:
        v["t_bcast_s"] = None
    worker = next(iter(broken["workers"].values()))
    worker["request_s"], worker["probe_error"] = [], "StoreError: HEAD LATEST failed"
    broken["planner"] = demo._planner(CONFIG, broken)
    assert "unavailable" in broken["planner"]["large"]["t_bcast"]
    assert "unavailable" in broken["planner"]["large"]["capacity_rule"]
    rl_demo_render.print_report(broken)
    out = capsys.readouterr().out
    assert "large run: T_bcast at 90% not predicted" in out
    assert "0 request round trips timed (a HEAD failed: StoreError: HEAD LATEST failed)" in out
