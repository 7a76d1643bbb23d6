"""A running fleet's links, as the planner wants them, from the workers' status objects.

Each worker records what it measured: the bytes and seconds of its recent
downloads, verify and install times, and its round trip to the bucket (the
quickest of a few HEADs at start-up). ``wanrl-s3 estimate --from-status URL``
turns those into :class:`~wanrl_s3.cost.fleet.WorkerLink` rows:

- downlink: the worker's largest download, its bytes over its seconds less one
  round trip (the model adds the round trips itself);
- uplink: not observable by a worker that only pulls; taken equal to the
  downlink (say otherwise with a fleet file);
- install rate: the installed version's raw bytes over verify + install seconds.

Workers silent for ``expire_after_s``, and workers with no download or no round
trip measured yet, are left out, each with a reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cost.fleet import FleetLinks, WorkerLink
from .broadcast_times import is_expired
from .status import WorkerStatus

MIN_MEASURED_S = 1e-3


@dataclass(frozen=True)
class MeasuredFleet:
    fleet: FleetLinks | None  # None when no worker had measured enough
    skipped: tuple[str, ...]  # "worker-id: why"


def _largest_download(status: WorkerStatus) -> dict[str, Any] | None:
    done = [i for i in status.installs if i.get("downloaded_bytes", 0) > 0 and i["download_s"] > 0]
    return max(done, key=lambda i: i["downloaded_bytes"], default=None)


def link_of(status: WorkerStatus, raw_bytes_of: Callable[[int], int | None]) -> WorkerLink | str:
    """The worker's link, or why it cannot be measured from its status."""
    if status.round_trip_s is None:
        return "no round trip recorded (restart it with this version of wanrl-s3)"
    largest = _largest_download(status)
    if largest is None:
        return "no download measured yet"
    rtt = status.round_trip_s
    seconds = largest["download_s"] - rtt
    if seconds < MIN_MEASURED_S:
        seconds = largest["download_s"]
    mbps = largest["downloaded_bytes"] * 8 / 1e6 / seconds
    raw = raw_bytes_of(int(largest["version"]))
    install_s = largest["verify_s"] + largest["apply_s"]
    install = raw / 1e6 / install_s if raw and install_s > MIN_MEASURED_S else None
    return WorkerLink(status.worker_id, mbps, mbps, rtt * 1000.0, status.region, install)


def measured_fleet(
    statuses: list[WorkerStatus],
    raw_bytes_of: Callable[[int], int | None],
    now_s: float,
    expire_after_s: float,
) -> MeasuredFleet:
    """The links of the fleet's live workers; the others, with the reason they are left out."""
    links, skipped = [], []
    for status in statuses:
        if is_expired(status, now_s, expire_after_s):
            skipped.append(f"{status.worker_id}: expired")
            continue
        found = link_of(status, raw_bytes_of)
        if isinstance(found, str):
            skipped.append(f"{status.worker_id}: {found}")
        else:
            links.append(found)
    return MeasuredFleet(FleetLinks(tuple(links)) if links else None, tuple(skipped))
