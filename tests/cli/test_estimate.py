"""``wanrl-s3 estimate`` through the real entry point: outputs and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from wanrl_s3.cli import estimate as estimate_cli
from wanrl_s3.cli import main
from wanrl_s3.cli.app import build_parser
from wanrl_s3.cost.freshness import stale_warning
from wanrl_s3.cost.prices import load_prices

# The reference page's figures are for raw full snapshots: --full-ratio 1.
POINT_8B = ["estimate", "--params", "8.2e9", "--t-train-s", "1500", "--batch", "2048"]
POINT_8B += ["--full-ratio", "1"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def shipped_staleness_today() -> str:
    """What a run prints on stderr today about the shipped table: nothing while it is fresh."""
    used = ("storage.aws", "cdns.cloudfront", "gpus")
    warning = stale_warning(load_prices(), used, date.today())
    return "" if warning is None else f"wanrl-s3: warning: {warning}\n"


def test_table_for_the_8b_point(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *POINT_8B, "--t-bcast-s", "1437")
    assert (code, err) == (0, shipped_staleness_today())
    assert (
        "T_bcast 1437 s (measured): slack 1563 s, required pool 2.621 rollouts/s, 9 workers" in out
    )
    assert "floor (star-unlimited, 100 Mbps downlink): 1312 s full, 66 s delta" in out
    rows = [
        line[20:].split()
        for line in out.splitlines()
        if line.startswith(("object", "CDN", "star", "peer"))
    ]
    assert [r[:4] for r in rows] == [
        ["1749", "s", "yes", "11"],
        ["87", "s", "yes", "5"],
        ["1749", "s", "yes", "11"],
        ["87", "s", "yes", "5"],
        ["3936", "s", "no", "-"],
        ["1322", "s", "yes", "9"],
    ]
    assert out.rstrip().splitlines()[-1].startswith("recommendation: CDN delta")
    assert "cdn: Amazon CloudFront, United States in front of the bucket, 8 edges" in out


def test_json_has_the_promised_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, *POINT_8B, "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["kappa"], data["staleness"], data["feasible"]) == (2, 3, True)
    assert f"{data['snapshot_gb']:.1f}" == "16.4"
    assert {"slack_s", "required_pool_rollouts_per_s", "workers_needed"} <= set(data)
    assert set(data["by_topology"]) == {
        "object_storage_full",
        "object_storage_delta",
        "cdn_full",
        "cdn_delta",
        "star",
        "peer_chain",
    }
    assert data["cdn"] == "Amazon CloudFront, United States"
    assert data["price_entries"] == ["storage.aws", "cdns.cloudfront", "gpus"]
    assert data["prices_as_of"] == "2026-12-03"
    # The CDN comparison the JSON carries: edge egress beats plain bucket egress at 11 workers.
    rows = data["by_topology"]
    cdn, plain = rows["cdn_full"], rows["object_storage_full"]
    assert cdn["egress_usd_per_run"] < plain["egress_usd_per_run"]
    assert data["by_topology"]["star"]["workers_needed"] is None


def test_infeasible_exits_5_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *POINT_8B, "--t-bcast-s", "3100")
    assert (code, out) == (5, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        "wanrl-s3: error: infeasible: broadcast 3100s does not fit in kappa*T_train = 3000s; "
        "raise kappa (and S), or cut T_bcast; fix: --kappa 3 (S=4)"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--params", "x", "--t-train-s", "1500", "--batch", "2048"],
        ["estimate", "--params", "8.2e9", "--batch", "2048"],
        [*POINT_8B, "--staleness", "2"],
        [*POINT_8B, "--staleness", "3", "--kappa", "2"],
        [*POINT_8B, "--t-train-s", "-5"],
        [*POINT_8B, "--density", "0"],
        [*POINT_8B, "--gamma", "0.9"],
        [*POINT_8B, "--provider", "s4"],
        [*POINT_8B, "--provider", "r2"],  # storage only: where does the trainer run?
        [*POINT_8B, "--trainer-gpus", "H100"],
        [*POINT_8B, "--worker-gpu", "TPUv9"],
        [*POINT_8B, "--prices", "/nonexistent/prices.json"],
        [*POINT_8B, "--cdn", "akamai"],
        [*POINT_8B, "--cdn", "cloudflare"],  # fronts R2 and B2, not S3
        [*POINT_8B, "--cdn-edges", "0"],
        [*POINT_8B, "--replica-regions", "us-east-2,,"],
        [*POINT_8B, "--replica-regions", "us-east-2", "--region-count", "3"],
        [*POINT_8B, "--dropped-fraction", "1"],
        [*POINT_8B, "--dropped-fraction", "-0.1"],
        [*POINT_8B, "--dropped-fraction", "nan"],
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("wanrl-s3: error: ") and err.count("\n") == 1


def test_force_allows_s_below_3_and_large_s_warns(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, *POINT_8B, "--staleness", "2", "--force")[0] == 0
    code, _, err = run_cli(capsys, *POINT_8B, "--kappa", "9")
    assert code == 0 and "warning: staleness 10 is outside the measured stable envelope" in err


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "plan.png"
    code, out, _ = run_cli(capsys, *POINT_8B, "--plot", str(target))
    assert code == 0 and f"plot written to {target}" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_from_verl_config_names_the_command_that_replaced_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, *POINT_8B, "--from-verl-config", "run.yaml")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "python -m wanrl_s3_verl.estimate run.yaml" in err


def test_the_moved_flag_is_named_before_the_flags_it_would_have_supplied(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "estimate", "--from-verl-config", "run.yaml")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "python -m wanrl_s3_verl.estimate run.yaml" in err


def test_required_flags_are_named_together(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "estimate", "--t-train-s", "1500")
    assert (code, out) == (2, "")
    assert err == (
        "wanrl-s3: error: estimate: the following arguments are required: --params, --batch\n"
    )


def test_region_count_and_its_old_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    """--regions names a regions FILE in every other command: estimate counts with
    --region-count; the old --regions N still plans, with one warning line."""
    code, out, err = run_cli(capsys, *POINT_8B, "--region-count", "3", "--json")
    assert (code, json.loads(out)["inputs"]["regions"]) == (0, 3)
    assert "--region-count" not in err
    code, old, err = run_cli(capsys, *POINT_8B, "--regions", "3", "--json")
    assert code == 0 and json.loads(old) == json.loads(out)
    assert err.startswith(
        "wanrl-s3: warning: estimate --regions 3 is now --region-count 3 (--regions names a "
        "regions file in the other commands)\n"
    )


def test_the_planner_reads_no_yaml() -> None:
    """The core parses no verl config: estimate imports neither PyYAML nor the adapter."""
    code = (
        "import sys; from wanrl_s3.cli import main; "
        "main(['estimate', '--params', '8.2e9', '--t-train-s', '1500', '--batch', '2048']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'wanrl_s3_verl')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"


def test_a_stale_price_entry_warns_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*POINT_8B, "--t-bcast-s", "1437"]
    args = build_parser(argv).parse_args(argv)
    assert estimate_cli.run(args, today=date(2026, 12, 3)) == 0
    fresh_out, fresh_err = capsys.readouterr()
    assert fresh_err == ""
    assert estimate_cli.run(args, today=date(2027, 6, 4)) == 0
    out, err = capsys.readouterr()
    assert out == fresh_out  # the estimate itself does not change
    assert err.count("\n") == 1 and err.startswith(
        "wanrl-s3: warning: prices older than 6 months: storage.aws (read 2026-12-03), "
        "cdns.cloudfront (read 2026-12-03), gpus (read 2026-12-02)"
    )


def test_a_user_price_file_with_a_bad_key_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = json.loads(
        (Path(__file__).resolve().parents[2] / "wanrl_s3/cost/prices.json").read_text("utf-8")
    )
    data["storage"]["aws"]["egress_tier"] = data["storage"]["aws"].pop("egress_tiers")
    path = tmp_path / "negotiated.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = run_cli(capsys, *POINT_8B, "--prices", str(path))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(
        "wanrl-s3: error: prices: storage.aws.egress_tier is not a known key: remove it or fix "
        "its spelling"
    )


def test_replica_regions_set_the_region_count(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, *POINT_8B, "--replica-regions", "us-east-2,us-west-2", "--json")
    data = json.loads(out)
    assert code == 0 and data["inputs"]["regions"] == 3
    assert data["inputs"]["replica_regions"] == ["us-east-2", "us-west-2"]


def test_a_plot_into_a_new_folder_is_written_and_the_table_always_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    base = ["estimate", "--params", "8.2e9", "--t-train-s", "1500", "--batch", "2048"]
    plot = tmp_path / "new" / "folder" / "sizing.png"
    assert main([*base, "--plot", str(plot)]) == 0
    assert plot.stat().st_size > 0 and "snapshot 16.4 GB" in capsys.readouterr().out
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main([*base, "--plot", str(blocker / "x.png")]) == 2
    out, err = capsys.readouterr()
    assert "snapshot 16.4 GB" in out and err.count("\n") == 1 and "cannot write plot" in err


def test_a_small_model_is_not_a_zero_gigabyte_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--params", "2e6", "--t-train-s", "10", "--batch", "64"]) == 0
    out = capsys.readouterr().out
    assert "snapshot 4 MB" in out and "0.0 GB" not in out


def test_drops_size_a_larger_fleet_and_nothing_dropped_is_the_pages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A fifth dropped as too old: 4096 / 1563 / 0.8 = 3.276 rollouts/s, 11 workers, not 9."""
    code, out, _ = run_cli(capsys, *POINT_8B, "--t-bcast-s", "1437", "--dropped-fraction", "0.2")
    assert code == 0
    assert (
        "required pool 3.276 rollouts/s (20% dropped as too old: 2.621 admitted), "
        "11 workers needed at 0.33 rollouts/s each" in out
    )
    code, out, _ = run_cli(capsys, *POINT_8B, "--t-bcast-s", "1437", "--dropped-fraction", "0")
    assert code == 0 and "required pool 2.621 rollouts/s, 9 workers needed" in out


def test_unshipped_rows_are_starred_and_ranked_only_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(capsys, *POINT_8B, "--density", "1")
    assert code == 0
    lines = out.splitlines()
    assert [line.split("  ")[0] for line in lines if line.startswith(("star", "peer"))] == [
        "star *",
        "peer chain *",
    ]
    assert (
        "* star, peer chain: modelled, not shipped by wanrl-s3; for comparison, never "
        "recommended (--include-unshipped ranks them)"
    ) in lines
    assert lines[-1].startswith("recommendation: CDN full is the cheapest feasible topology "
                                "wanrl-s3 ships")  # fmt: skip
    code, out, _ = run_cli(capsys, *POINT_8B, "--density", "1", "--include-unshipped")
    assert code == 0
    assert out.splitlines()[-1].startswith("recommendation: peer chain is the cheapest")
    assert "ranked with the others (--include-unshipped)" in out


def test_the_edges_fill_is_said_when_given(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, *POINT_8B, "--cdn-fill-rtt-ms", "40")
    assert code == 0
    assert "first reader at each edge waits 2 x 40 ms for the edge's fetches" in out
    assert "wait 2 x" not in run_cli(capsys, *POINT_8B)[1]
