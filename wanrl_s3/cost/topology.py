"""How long one publication takes to reach the fleet, per broadcast topology.

Sizes are decimal gigabytes and link rates megabits per second, as links are
sold. Four shapes are modelled:

``star_unlimited_s``
    every worker pulls at its own downlink: the floor no topology beats.
``star_limited_s``
    the trainer pushes to all N at once and its uplink is split N ways.
``chain_pipelined_s``
    floor(B0 / Bw) parallel store-and-forward chains relaying chunk by chunk:
    depth adds pipeline fill, not another copy of the payload.
``object_storage_s``
    the publisher uploads to a bucket per region (or once, then the provider
    replicates), and each worker pulls from its region's bucket at its own
    downlink. Downloads start only after the upload: the commit protocol writes
    every chunk before the manifest, so a version is invisible until complete.
"""

from __future__ import annotations

import math

from ..errors import UsageError
from ..units import require_int, require_non_negative, require_positive

#: Megabits in one decimal gigabyte.
MEGABITS_PER_GB = 8000.0
#: Megabytes in one decimal gigabyte.
MB_PER_GB = 1000.0


def snapshot_gb(params: float, bytes_per_param: float = 2.0) -> float:
    """Full snapshot size: every parameter at its wire width (2 bytes for bf16)."""
    require_positive("params", params)
    require_positive("bytes_per_param", bytes_per_param)
    return params * bytes_per_param / 1e9


def payload_gb(params: float, bytes_per_param: float = 2.0, density: float = 1.0) -> float:
    """Bytes one publication ships: the snapshot, or the changed fraction of it for a delta.

    A sparse delta also ships indices; we leave that out on purpose so the
    figure stays a lower bound the codec's measured ratio can be compared to.
    """
    if not (isinstance(density, (int, float)) and 0.0 < density <= 1.0):
        raise UsageError(
            f"density must be in (0, 1] (the fraction of the snapshot a delta ships), "
            f"got {density!r}"
        )
    return snapshot_gb(params, bytes_per_param) * density


def transfer_s(size_gb: float, rate_mbps: float) -> float:
    """Seconds to move ``size_gb`` over a link of ``rate_mbps`` at line rate."""
    require_non_negative("size_gb", size_gb)
    require_positive("rate_mbps", rate_mbps)
    return size_gb * MEGABITS_PER_GB / rate_mbps


def star_unlimited_s(payload_gb: float, downlink_mbps: float) -> float:
    """Every worker saturates its own downlink: the per-worker floor."""
    return transfer_s(payload_gb, downlink_mbps)


def star_limited_s(
    payload_gb: float, uplink_mbps: float, downlink_mbps: float, workers: int
) -> float:
    """Trainer pushes to all N at once; each worker gets min(Bw, B0 / N)."""
    require_positive("uplink_mbps", uplink_mbps)
    require_int("workers", workers)
    return transfer_s(payload_gb, min(downlink_mbps, uplink_mbps / workers))


def chain_count(uplink_mbps: float, downlink_mbps: float) -> int:
    """Parallel chains the trainer uplink feeds at full worker line rate (at least one)."""
    require_positive("uplink_mbps", uplink_mbps)
    require_positive("downlink_mbps", downlink_mbps)
    return max(1, math.floor(uplink_mbps / downlink_mbps))


def chain_pipelined_s(
    payload_gb: float,
    uplink_mbps: float,
    downlink_mbps: float,
    workers: int,
    chunk_mb: float = 64.0,
) -> float:
    """The floor plus one chunk of pipeline fill per hop beyond the first.

    A chunk larger than the payload cannot exist, so the fill uses the smaller
    of the two; that keeps tiny deltas from paying for a phantom 64 MB chunk.
    """
    require_int("workers", workers)
    require_positive("chunk_mb", chunk_mb)
    depth = math.ceil(workers / chain_count(uplink_mbps, downlink_mbps))
    chunk_gb = min(chunk_mb / MB_PER_GB, payload_gb)
    return star_unlimited_s(payload_gb, downlink_mbps) + (depth - 1) * transfer_s(
        chunk_gb, downlink_mbps
    )


def object_storage_s(
    payload_gb: float,
    downlink_mbps: float,
    upload_mbps: float,
    regions: int = 1,
    replicate: bool = False,
    replication_lag_s: float = 0.0,
) -> float:
    """Upload (once per region, or once plus replication lag) then the worker's download.

    The fleet size does not appear: the bucket, not the trainer, carries the
    fan-out, which is the whole reason to use one.
    """
    require_int("regions", regions)
    require_non_negative("replication_lag_s", replication_lag_s)
    copies = 1 if replicate else regions
    lag_s = replication_lag_s if replicate and regions > 1 else 0.0
    upload_s = transfer_s(payload_gb * copies, upload_mbps)
    return upload_s + lag_s + star_unlimited_s(payload_gb, downlink_mbps)
