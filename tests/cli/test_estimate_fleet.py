"""`wanrl-s3 estimate --fleet FILE | --from-status URL`: the planner on a heterogeneous fleet."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from wanrl_s3 import InstallResult, PublishConfig, Publisher, WorkerStatus, open_store
from wanrl_s3.cli import main
from wanrl_s3.format import layout

PLAN = ["estimate", "--params", "1e9", "--t-train-s", "600", "--batch", "64", "--json"]
PLAN += ["--full-ratio", "1"]  # the figures below are for raw full snapshots


def plan_of(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict, str]:
    assert main([*PLAN, *argv]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_a_fleet_file_sets_the_fleet_and_its_quantile_sets_t_bcast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fast = "".join(f"f{i},1000,1000,10,eu\n" for i in range(9))
    fleet = tmp_path / "fleet.csv"
    fleet.write_text(
        "name,downlink_mbps,uplink_mbps,rtt_ms,region\n" + fast + "slow,10,10,200,us\n"
    )
    plan, _ = plan_of(capsys, "--fleet", str(fleet), "--poll-interval-s", "2")
    rows = plan["by_topology"]
    assert plan["inputs"]["workers"] == 10 and rows["object_storage_full"]["fleet_workers"] == 10
    # 90% of 10 is the 9th worker: a fast one; the 10 Mbit/s host is the tail, not T_bcast
    bucket_full = rows["object_storage_full"]["t_bcast_s"]
    upload_s = 2.0 * 8000 / 300  # 2 GB at the default 300 Mbit/s trainer uplink
    assert bucket_full == pytest.approx(upload_s + 1 + 4 * 0.01 + 16 * 1514 / 1448 + 2000 / 500)
    every, _ = plan_of(capsys, "--fleet", str(fleet), "--poll-interval-s", "2", "--fraction", "1")
    assert every["by_topology"]["object_storage_full"]["t_bcast_s"] > bucket_full + 1000
    text = [a for a in PLAN if a != "--json"]
    assert main([*text, "--fleet", str(fleet), "--poll-interval-s", "2"]) == 0
    header = capsys.readouterr().out  # the text says which fleet it planned for
    assert "fleet: 10 workers, each on its own link" in header
    assert "downlinks 10-1000 Mbps (median 1000), round trips 10-200 ms; T_bcast at 90%" in header


def test_a_batch_boundary_adds_to_each_rows_broadcast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("name,downlink_mbps,uplink_mbps,rtt_ms\na,100,100,10\nb,200,200,20\n")
    before, _ = plan_of(capsys, "--fleet", str(fleet))
    after, _ = plan_of(capsys, "--fleet", str(fleet), "--batch-wait-s", "7.5")
    for name, row in before["by_topology"].items():
        assert after["by_topology"][name]["t_bcast_s"] == pytest.approx(row["t_bcast_s"] + 7.5)
    text = [a for a in PLAN if a != "--json"]
    assert main([*text, "--fleet", str(fleet), "--batch-wait-s", "7.5"]) == 0
    assert "poll 10 s, batch boundary 7.5 s" in capsys.readouterr().out
    assert main([*PLAN, "--fleet", str(fleet), "--batch-wait-s", "-1"]) == 2
    assert capsys.readouterr().err.startswith("wanrl-s3: error: batch_wait_s must be")


def test_the_edges_answer_from_cache_without_the_stores_answer_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("name,downlink_mbps,uplink_mbps,rtt_ms\na,100,100,10\nb,200,200,20\n")
    before, _ = plan_of(capsys, "--fleet", str(fleet), "--cdn-edges", "1")
    after, _ = plan_of(capsys, "--fleet", str(fleet), "--cdn-edges", "1", "--store-answer-ms", "4")
    for name, row in before["by_topology"].items():
        saved = 2 * 0.004 if name.startswith("cdn_") else 0.0  # the manifest and payload reads
        assert after["by_topology"][name]["t_bcast_s"] == pytest.approx(row["t_bcast_s"] - saved)
    text = [a for a in PLAN if a != "--json"]
    assert main([*text, "--fleet", str(fleet), "--store-answer-ms", "4"]) == 0
    assert "cached answers skip the store's 4 ms on 2 reads" in capsys.readouterr().out
    for argv, says in (
        (["--store-answer-ms", "11"], "cannot exceed the smallest (a: 10 ms)"),
        (["--store-answer-ms", "-1"], "store_answer_ms must be"),
    ):
        assert main([*PLAN, "--fleet", str(fleet), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("wanrl-s3: error: ") and says in err and err.count("\n") == 1
    assert main([*PLAN, "--store-answer-ms", "4"]) == 2
    assert "store_answer_ms needs a fleet" in capsys.readouterr().err


def test_fleet_flags_refuse_what_contradicts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("downlink_mbps,uplink_mbps,rtt_ms\n100,100,x\n")
    assert main([*PLAN, "--fleet", str(fleet)]) == 2
    assert capsys.readouterr().err == (
        "wanrl-s3: error: fleet.csv line 2: rtt_ms must be a number >= 0, got 'x'\n"
    )
    fleet.write_text("downlink_mbps,uplink_mbps,rtt_ms\n100,100,5\n")
    assert main([*PLAN, "--fleet", str(fleet), "--workers", "3"]) == 2
    assert "--workers and --fleet" in capsys.readouterr().err
    assert main([*PLAN, "--fleet", str(tmp_path / "missing.csv")]) == 2
    assert "cannot read --fleet" in capsys.readouterr().err


def status(worker_id: str, updated_at_s: float, rtt_s: float | None, mb: float) -> bytes:
    done = InstallResult(
        version=1,
        tensors=1,
        path=(1,),
        downloaded_bytes=int(mb * 1e6),
        published_at_s=0.0,
        seen_at_s=0.1,
        ready_at_s=1.0,
        installed_at_s=1.2,
        download_s=2.0 + rtt_s if rtt_s else 2.0,
        verify_s=0.01,
        apply_s=0.01,
    )
    return WorkerStatus(
        worker_id=worker_id,
        region="eu",
        installed_version=1,
        installs=(done.to_dict(),),
        updated_at_s=updated_at_s,
        started_at_s=0.0,
        round_trip_s=rtt_s,
    ).to_json()


def test_from_status_reads_each_workers_measured_link(
    s3_url: str, s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig()).publish({"w": np.zeros(250_000, np.float32)}, 1)
    now = time.time()
    for worker_id, updated, rtt, mb in (
        ("a", now, 0.05, 25.0),  # 25 MB in 2 s after its round trip: 100 Mbit/s
        ("b", now, 0.2, 5.0),  # 20 Mbit/s
        ("gone", now - 3600, 0.05, 25.0),  # expired: left out
        ("old", now, None, 25.0),  # no round trip recorded: left out
    ):
        store.put_bytes(layout.worker_status_key(worker_id), status(worker_id, updated, rtt, mb))
    plan, err = plan_of(capsys, "--from-status", s3_url, "--status-endpoint-url", s3_endpoint)
    links = {w["name"]: w for w in plan["inputs"]["fleet"]["workers"]}
    assert set(links) == {"a", "b"} and plan["inputs"]["workers"] == 2
    assert links["a"]["downlink_mbps"] == pytest.approx(100.0)
    assert links["b"]["downlink_mbps"] == pytest.approx(20.0) and links["b"]["rtt_ms"] == 200.0
    assert links["a"]["install_mb_per_s"] == pytest.approx(1.0 / 0.02)  # 1 MB raw in 0.02 s
    assert err.count("\n") == 1 and "left out 2 workers: gone: expired; old: no round trip" in err


def test_a_fleet_too_small_is_short_in_the_rows_the_headline_and_the_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two workers where six or more are needed: no row says "yes" while a warning says
    the fleet is too small; each row names the fleet it needs."""
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("downlink_mbps,uplink_mbps,rtt_ms\n1000,100,20\n500,50,40\n")
    argv = ["estimate", "--params", "1e9", "--t-train-s", "300", "--batch", "512"]
    assert main([*argv, "--fleet", str(fleet)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("topology"))
    assert lines[header].split()[2:4] == ["feasible", "needed"]
    rows = [line[20:].split() for line in lines[header + 1 : header + 7]]
    needed = [int(r[3]) for r in rows]
    assert [r[2] for r in rows] == ["short"] * 6 and min(needed) > 2
    assert lines[header + 7].startswith("short: the broadcast fits in kappa*T_train, but a fleet")
    assert (
        f"{min(needed)} workers needed at 0.33 rollouts/s each (gamma 1.1); the fleet has 2" in out
    )
    warned = [line for line in err.splitlines() if "smaller than the" in line]
    assert len(warned) == 6 and all("a fleet of 2 workers is smaller" in w for w in warned)
    assert [int(w.split("smaller than the ")[1].split()[0]) for w in warned] == needed
    # twelve workers: enough for some rows; "short" exactly where a row needs more
    big = tmp_path / "big.csv"
    big.write_text("downlink_mbps,uplink_mbps,rtt_ms\n" + "1000,100,20\n" * 12)
    assert main([*argv, "--fleet", str(big)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("topology"))
    rows = [line[20:].split() for line in lines[header + 1 : header + 7]]
    expect = ["no" if r[3] == "-" else "short" if int(r[3]) > 12 else "yes" for r in rows]
    assert [r[2] for r in rows] == expect and "yes" in expect and "short" in expect
    assert err.count("a fleet of 12 workers is smaller") == expect.count("short")


def test_one_worker_and_equal_links_print_one_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("downlink_mbps,uplink_mbps,rtt_ms\n570.442,100,20\n")
    text = [a for a in PLAN if a != "--json"]
    assert main([*text, "--fleet", str(fleet)]) == 0
    out = capsys.readouterr().out
    assert "fleet: 1 worker, each on its own link (--fleet / --from-status): downlink " in out
    assert "downlink 570.442 Mbps, round trip 20 ms;" in out and "570.442-" not in out
    fleet.write_text("downlink_mbps,uplink_mbps,rtt_ms\n570.442,100,20\n570.442,100,20\n")
    assert main([*text, "--fleet", str(fleet)]) == 0
    assert (
        "fleet: 2 workers, each on its own link (--fleet / --from-status): downlinks "
        "570.442 Mbps, round trips 20 ms;" in capsys.readouterr().out
    )


def test_from_status_with_nobody_measured_is_one_error_naming_who_was_left_out(
    s3_url: str, s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reasons are in the error line, not warnings printed before it."""
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    store.put_bytes(layout.worker_status_key("old"), status("old", time.time(), None, 25.0))
    broken = json.loads(status("broken", time.time(), 0.05, 25.0))
    broken["installs"] = "x"  # skipped as malformed, not a crash of the planner
    store.put_bytes(layout.worker_status_key("broken"), json.dumps(broken).encode())
    code = main([*PLAN, "--from-status", s3_url, "--status-endpoint-url", s3_endpoint])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "no live worker has measured" in err and "old: no round trip recorded" in err
