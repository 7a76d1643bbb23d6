"""``wanrl-s3 estimate --fleet FILE | --from-status URL``: plan for the fleet you have.

Kept apart from estimate.py: these flags replace the uniform ``--downlink-mbps``
by one link per worker (cost/fleet.py) and fix the fleet's size to its rows.
The fleet comes from a file (cost/fleet_file.py) or from a running fleet's
status objects (fleet/links.py).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from ..cost.fleet import DEFAULT_INSTALL_MB_PER_S, FleetLinks
from ..cost.fleet_file import parse_fleet
from ..errors import UsageError, WanrlError
from .held import tell

MAX_FLEET_FILE_BYTES = 64 << 20


def add_fleet_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("a heterogeneous fleet (replaces --downlink-mbps)")
    source = g.add_mutually_exclusive_group()
    source.add_argument(
        "--fleet",
        metavar="FILE",
        help="one row per worker, CSV or JSON (downlink_mbps, uplink_mbps, rtt_ms ...)",
    )
    source.add_argument(
        "--from-status",
        metavar="URL",
        help="a running fleet's store (s3://bucket/prefix ...): its workers' measurements",
    )
    g.add_argument(
        "--status-endpoint-url",
        metavar="URL",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="S3-compatible endpoint of --from-status (default: $AWS_ENDPOINT_URL or AWS)",
    )
    g.add_argument(
        "--fraction",
        type=float,
        default=0.9,
        metavar="F",
        help="T_bcast is when this fraction, in (0, 1], of the fleet has a version "
        "(as `status --fraction`)",
    )
    g.add_argument(
        "--install-mb-per-s",
        type=float,
        default=DEFAULT_INSTALL_MB_PER_S,
        metavar="MB",
        help="a worker's verify+install rate, MB/s, where not measured",
    )
    g.add_argument(
        "--poll-interval-s",
        type=float,
        default=10.0,
        metavar="S",
        help="the workers' seconds between two looks at LATEST (as `worker --poll-interval-s`)",
    )
    g.add_argument(
        "--chains",
        type=int,
        metavar="K",
        help="peer chains (default: the trainer's uplink over the median downlink)",
    )
    g.add_argument(
        "--batch-wait-s",
        type=float,
        default=0.0,
        metavar="S",
        help="each worker's wait for a batch boundary to install at, seconds",
    )


def _read_fleet_file(path: str) -> FleetLinks:
    try:
        with Path(path).open("rb") as f:
            data = f.read(MAX_FLEET_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read --fleet {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_FLEET_FILE_BYTES:
        raise UsageError(f"--fleet {path} is larger than {MAX_FLEET_FILE_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--fleet {path} is not UTF-8 text") from exc
    return parse_fleet(text, Path(path).name)


def _fleet_from_status(url: str, endpoint_url: str | None) -> FleetLinks:
    from ..fleet.broadcast_times import EXPIRE_AFTER_S
    from ..fleet.links import measured_fleet
    from ..fleet.status import read_statuses
    from ..format.manifests import Manifests
    from ..store import open_store

    store = open_store(url, endpoint_url=endpoint_url)
    manifests = Manifests(store)

    def raw_bytes_of(version: int) -> int | None:
        try:
            return manifests.get(version).raw_bytes
        except WanrlError:
            return None  # collected since: the default install rate applies

    found = measured_fleet(read_statuses(store), raw_bytes_of, time.time(), EXPIRE_AFTER_S)
    left_out = _left_out(found.skipped)
    if found.fleet is None:
        raise UsageError(
            f"--from-status {url}: no live worker has measured a download yet"
            + (f" ({left_out})" if left_out else "")
        )
    if left_out:
        tell(f"wanrl-s3: warning: --from-status {left_out}")
    return found.fleet


def _left_out(skipped: tuple[str, ...], shown: int = 5) -> str:
    """The workers left out and why, in one line (the first ``shown`` named)."""
    if not skipped:
        return ""
    more = f"; and {len(skipped) - shown} more" if len(skipped) > shown else ""
    return f"left out {len(skipped)} workers: " + "; ".join(skipped[:shown]) + more


def fleet_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """PlanInputs fields for the fleet flags (the uniform case: only the shared ones)."""
    common = {
        "bcast_fraction": args.fraction,
        "install_mb_per_s": args.install_mb_per_s,
        "poll_interval_s": args.poll_interval_s,
        "chains": args.chains,
        "batch_wait_s": args.batch_wait_s,
    }
    if args.fleet is None and args.from_status is None:
        return common
    if args.workers is not None:
        raise UsageError(
            "--workers and --fleet/--from-status exclude each other: the fleet sets it"
        )
    if args.fleet is not None:
        fleet = _read_fleet_file(args.fleet)
    else:
        fleet = _fleet_from_status(args.from_status, args.status_endpoint_url)
    return {
        **common,
        "fleet": fleet,
        "workers": len(fleet),
        "downlink_mbps": fleet.median_downlink_mbps,
    }
