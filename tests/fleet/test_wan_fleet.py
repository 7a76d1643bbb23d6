"""benchmarks/wan_fleet.py, its fast part: two shaped hosts, one version, every topology.

Needs root and Linux network namespaces with tbf; skipped, with the reason, where the
machine does not allow them. The benchmark's own figures (ten hosts, keyframe and
deltas) are in docs/benchmarks.md; here the run must work end to end, clean up its
namespaces, and the planner must not be far off (a broken model is off by far more).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wanrl_s3.cli import main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.netns


def netns_unavailable() -> str | None:
    """Why this machine cannot run the benchmark, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if not (shutil.which("ip") and shutil.which("tc")):
        return "needs iproute2 (ip, tc)"
    probe = f"wanrl-probe-{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode:
        return f"cannot create a network namespace: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def test_two_hosts_one_version_measured_beside_the_planner(tmp_path: Path) -> None:
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    before = namespaces()
    fleet_file = tmp_path / "fleet.csv"
    argv = [sys.executable, str(ROOT / "benchmarks" / "wan_fleet.py"), "--hosts", "2"]
    argv += ["--mib", "2", "--deltas", "0", "--down-mbit", "20", "40", "--rtt-ms", "20", "80"]
    argv += ["--poll-interval-s", "0.2", "--seed", "3", "--json", "--fleet-out", str(fleet_file)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert (report["fleet_size"], report["seed"], len(report["links"])) == (2, 3, 2)
    assert report["uplink_queue"] == "acks-first"  # the default: bare ACKs skip the queue
    rows = {(r["topology"], r["kind"]): r for r in report["results"]}
    assert set(rows) == {("object_storage", "full"), ("cdn", "full"), ("peer_chain", "full")}
    for row in rows.values():
        assert row["measured_t_bcast_s"] > 0 and row["predicted_t_bcast_s"] > 0
        assert 0.5 < row["ratio"] < 2.0, row
    # the CDN phase: two edges, one host each; the bucket sent each edge one copy
    egress = rows["cdn", "full"]["egress"]
    assert egress["max_fetches_of_a_slice_per_edge"] == 1
    assert egress["fill_bytes"] == egress["served_bytes"]  # one worker behind each edge
    assert egress["fill_bytes"] == pytest.approx(egress["predicted_fill_bytes"], rel=1e-9)
    assert len(egress["fill_bytes_per_edge"]) == 2
    picks = report["recommendation"]  # the planner, modelled and fed what was measured
    assert len(picks) >= 3 and all(p["predicted"] and p["measured"] for p in picks)
    assert namespaces() <= before  # every namespace it made is gone
    plan = ["estimate", "--params", "1e9", "--t-train-s", "600", "--batch", "64"]
    assert main([*plan, "--fleet", str(fleet_file), "--json"]) == 0
