"""`wanrl-s3 gc`: one store, or every region a regions file says the publisher writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.regions.support import model, nudge, three_regions, write_regions
from wanrl_s3.cli import main
from wanrl_s3.cli.gc import describe
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fleet.retention import GcReport, RetentionPolicy, collect
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store

CHAIN = PublishConfig(keyframe_every=3)  # keyframes at 1, 4, 7


def publish_seven(stores: list) -> None:
    pub = Publisher(stores, CHAIN)
    state = model(1)
    for v in range(1, 8):
        state = nudge(state, v)
        pub.publish(state, v)


def test_gc_one_store_keeps_chains_and_dry_run_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"file://{tmp_path}/store"
    publish_seven([open_store(url)])
    assert main(["gc", "--store", url, "--keep", "2", "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)[url]
    assert dry["kept_versions"] == [4, 5, 6, 7] and dry["deleted_versions"] == [1, 2, 3]
    with Subscriber(open_store(url)) as sub:
        assert sub.versions() == list(range(1, 8))  # a dry run deletes nothing
    assert main(["gc", "--store", url, "--keep", "2"]) == 0
    assert "deleted 3 versions" in capsys.readouterr().out
    with Subscriber(open_store(url)) as sub:
        assert sub.versions() == [4, 5, 6, 7]
        assert sub.fetch(7, have=None).version == 7


def test_gc_regions_fanout_collects_every_region(
    tmp_path: Path, s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    regions = three_regions(s3_endpoint, "fanout")
    publish_seven([regions.store(r.name) for r in regions.regions])
    path = write_regions(tmp_path / "regions.toml", regions)
    assert main(["gc", "--regions", str(path), "--keep", "1", "--json"]) == 0
    reports = json.loads(capsys.readouterr().out)
    assert sorted(reports) == ["apne1", "euw1", "use1"]
    for name in reports:
        with Subscriber(regions.store(name)) as sub:
            assert sub.versions() == [7]


def test_gc_regions_replicate_collects_the_primary_only(
    tmp_path: Path, s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    regions = three_regions(s3_endpoint, "replicate")
    path = write_regions(tmp_path / "regions.toml", regions)
    publish_seven([regions.store("use1")])
    assert main(["gc", "--regions", str(path), "--keep", "1", "--dry-run", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["use1"]


def test_gc_needs_a_store_or_regions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc"]) == 2
    assert "--store" in capsys.readouterr().err


def test_a_dry_run_says_would_for_every_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"file://{tmp_path}/store"
    publish_seven([open_store(url)])
    assert main(["gc", "--store", url, "--keep", "2", "--dry-run"]) == 0
    line = capsys.readouterr().out
    assert "kept 4 versions; would delete 3 versions and " in line
    assert line.rstrip().endswith("would abort 0 stale uploads") and " aborted" not in line
    dry = GcReport(kept_versions=[7], deleted_versions=[6], aborted_uploads=1, dry_run=True)
    assert describe(dry) == (
        "kept 1 version; would delete 1 version and 0 objects (0 B, 0 orphaned); "
        "would abort 1 stale upload"
    )
    done = dataclasses.replace(dry, dry_run=False, deleted_objects=2, deleted_bytes=2048)
    assert describe(done) == (
        "kept 1 version; deleted 1 version and 2 objects (2.05 KB, 0 orphaned); "
        "aborted 1 stale upload"
    )


@pytest.mark.parametrize("junk", [b"not json", b'{"format": "wanrl-s3/manifest"}'])
def test_one_unreadable_manifest_is_left_alone_and_the_rest_is_collected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], junk: bytes
) -> None:
    """A junk manifest far above the others stops neither gc nor inspect for the store."""
    url = f"file://{tmp_path}/store"
    store = open_store(url)
    publish_seven([store])
    store.put_bytes(layout.manifest_key(999), junk)
    store.put_bytes(layout.payload_key(999, "x/000000.bin"), b"whatever it came with")
    assert main(["gc", "--store", url, "--keep", "2", "--grace-s", "0", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)[url]
    assert report["deleted_versions"] == [1, 2, 3] and list(report["unreadable_versions"]) == [
        "999"
    ]
    assert err.count("\n") == 1 and "left the manifest of v999 alone" in err
    assert store.exists(layout.manifest_key(999))  # a person decides what it is
    assert store.exists(layout.payload_key(999, "x/000000.bin"))
    assert main(["inspect", "--store", url, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["versions"]
    assert [r["version"] for r in rows] == [4, 5, 6, 7, 999]
    assert rows[-1]["kind"] == "unreadable" and rows[-1]["error"]
    assert main(["inspect", "--store", url]) == 0
    assert "unreadable: " in capsys.readouterr().out
    assert main(["inspect", "--store", url, "--version", "999"]) == 3  # asked for: refused


def test_a_chain_through_an_unreadable_manifest_keeps_everything_below(tmp_path: Path) -> None:
    """What a delta needs below a base gc cannot read is unknown: nothing there is deleted."""
    url = f"file://{tmp_path}/store"
    store = open_store(url)
    publish_seven([store])  # keyframes at 1, 4, 7; 6 is a delta on 5, 5 on 4
    store.put_bytes(layout.manifest_key(5), b"damaged")
    report = collect(store, RetentionPolicy(keep_versions=2, grace_s=0.0))
    assert report.deleted_versions == [] and list(report.unreadable_versions) == [5]
    assert store.exists(layout.manifest_key(5))
