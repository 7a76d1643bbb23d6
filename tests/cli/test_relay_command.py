"""`wanrl-s3 relay` as a process: copy mode end to end, stopped by SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.regions.support import SMALL, model, nudge, same, three_regions, wait_for, write_regions
from wanrl_s3.cli import main
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.format.latest import Latest
from wanrl_s3.publish.publisher import Publisher
from wanrl_s3.store import get_or_none


def test_relay_process_commits_each_new_version_in_every_replica(
    s3_endpoint: str, tmp_path: Path
) -> None:
    regions = three_regions(s3_endpoint, "copy")
    path = write_regions(tmp_path / "regions.toml", regions)
    pub = Publisher(regions.store("use1"), SMALL)
    state = model(1)
    pub.publish(state, 1)
    replicas = [r.store() for r in regions.replicas]

    def all_at(version: int) -> bool:
        blobs = [get_or_none(r, layout.LATEST_KEY) for r in replicas]
        return all(b is not None and Latest.from_json(b.data).version == version for b in blobs)

    relay = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wanrl_s3.cli",
            "relay",
            "--regions",
            str(path),
            "--poll-interval-s",
            "0.1",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        wait_for(lambda: all_at(1))
        state = nudge(state, 2)
        pub.publish(state, 2)
        wait_for(lambda: all_at(2))
    finally:
        relay.send_signal(signal.SIGTERM)
        _, err = relay.communicate(timeout=30)
    assert relay.returncode == 0, err
    assert "relayed v2 to euw1: 1 objects" in err and "server-side" in err
    assert "relayed v1 to apne1" in err and err.rstrip().endswith("stopped")
    for replica in replicas:
        with Subscriber(replica) as sub:
            assert same(sub.fetch(2).tensors, state)


def test_relay_once_exits_after_one_pass(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regions = three_regions(s3_endpoint, "copy")
    Publisher(regions.store("use1"), SMALL).publish(model(3), 4)
    path = write_regions(tmp_path / "regions.toml", regions)
    assert main(["relay", "--regions", str(path), "--once"]) == 0
    for replica in regions.replicas:
        with Subscriber(replica.store()) as sub:
            assert sub.versions() == [4] and same(sub.fetch().tensors, model(3))


def test_relay_once_refuses_an_unsigned_primary_with_a_key_in_one_line(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regions = three_regions(s3_endpoint, "copy")
    Publisher(regions.store("use1"), SMALL).publish(model(3), 1)  # unsigned
    path = write_regions(tmp_path / "regions.toml", regions)
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    capsys.readouterr()
    argv = ["relay", "--regions", str(path), "--once", "--verify-key", str(tmp_path / "k.pub.pem")]
    assert main(argv) == 3
    err = capsys.readouterr().err
    final = [line for line in err.strip().splitlines() if " wanrl-s3 relay: " not in line]
    assert len(final) == 1 and "not signed" in final[0], err
    for replica in regions.replicas:
        assert replica.store().list("") == []  # nothing relayed
