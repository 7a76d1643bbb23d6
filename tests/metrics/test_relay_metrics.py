"""A running `wanrl-s3 relay --metrics-port` scraped over HTTP: each region's version, the
bytes and seconds of each version relayed, and a conflict counted by region and kind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.metrics.scrape import metrics_url, scrape_until, value
from tests.regions.support import SMALL, model, nudge, three_regions, write_regions
from wanrl_s3.publish.publisher import Publisher

R = "wanrl_s3_relay_"


def test_a_running_relay_exports_each_regions_version_its_copies_and_a_conflict(
    s3_endpoint: str, tmp_path: Path
) -> None:
    regions = three_regions(s3_endpoint, "copy")
    path = write_regions(tmp_path / "regions.toml", regions)
    pub = Publisher(regions.store("use1"), SMALL)
    state = model(1)
    first = pub.publish(state, 1)
    relay = subprocess.Popen(
        [sys.executable, "-m", "wanrl_s3.cli", "relay", "--regions", str(path),
         "--poll-interval-s", "0.1", "--metrics-port", "0", "--metrics-addr", "127.0.0.1"],
        stderr=subprocess.PIPE, text=True, env={**os.environ},
    )  # fmt: skip
    lines: list[str] = []
    try:
        url = metrics_url(relay, lines)

        def both_at(version: int):
            return lambda s: all(
                value(s, R + "replica_version", region=r) == version for r in ("euw1", "apne1")
            )

        s = scrape_until(url, both_at(1))
        assert value(s, R + "primary_version") == 1
        for region in ("euw1", "apne1"):
            assert value(s, R + "versions_behind", region=region) == 0
            assert value(s, R + "copy_seconds_count", region=region) == 1
            # one S3 service: every object copied server-side, all of the version's bytes
            copied = value(s, R + "copied_bytes_total", region=region, how="server_side")
            assert copied == first.stored_bytes > 0
        assert (value(s, R + "poll_seconds_count") or 0) >= 1
        assert value(s, R + "last_error_age_seconds") is None

        # another publisher committed a valid v2 of its own into euw1: the relay refuses to
        # overwrite it (a damaged copy, by contrast, it would repair)
        Publisher(regions.store("euw1"), SMALL).publish(nudge(model(7), 2), 2)
        pub.publish(nudge(state, 2), 2)
        s = scrape_until(
            url,
            lambda s: (
                (value(s, R + "failures_total", region="euw1", kind="conflict") or 0) >= 1
                and value(s, R + "replica_version", region="apne1") == 2
            ),
        )
        assert value(s, R + "primary_version") == 2
        assert value(s, R + "replica_version", region="euw1") == 1
        assert value(s, R + "versions_behind", region="euw1") == 1
        assert value(s, R + "versions_behind", region="apne1") == 0
        assert 0 <= (value(s, R + "last_error_age_seconds") or -1) < 60
        assert value(s, R + "failures_total", region="apne1", kind="conflict") is None
    finally:
        relay.send_signal(signal.SIGTERM)
        _, err = relay.communicate(timeout=30)
    assert relay.returncode == 0, "".join(lines) + err
