"""How long the trainer takes to publish one version, and how big a full version is.

Two facts about the publisher that the broadcast model needs and the reference
page does not have:

* **Full versions are coded.** A full snapshot is stored losslessly as byte
  planes (docs/full-format.md), so a keyframe, the copy every worker pulls to
  join, and a full version published when a delta does not pay all move
  ``full_ratio`` of the raw bytes. Deltas are already coded and are not scaled.
* **The trainer's ranks publish in parallel.** Each of R ranks uploads a
  balanced share of the version's payload at its own rate, so the payload goes
  out at R times one rank's rate, and one rank then commits: the manifest
  create, a read of LATEST and LATEST's compare-and-swap, in sequence. The
  aggregate rate is an upper bound: the store's endpoint (or the trainer's
  shared NIC) may saturate first, and then fewer ranks give the same time.

Pure arithmetic, no I/O; sizes in decimal GB, rates in Gbit/s or Mbit/s as named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UsageError
from ..units import require_int, require_non_negative, require_positive
from .topology import transfer_s

#: Stored over raw bytes of a full bf16 snapshot under the lossless byte-plane
#: codec (``wanrl_s3.codec.full``). From docs/results/full_codec.md (the runs behind
#: docs/benchmarks.md, "Full snapshots, losslessly"), row ``full.py (chosen)`` of the
#: LLaMA-like table (550,900,480 bf16
#: weights with per-tensor scales, 1.102 GB): 0.671. The same codec stored the
#: weights of the transformer trained there at 0.664; the planner takes the
#: larger, so it never promises more than was measured. Random bytes, int8 and
#: already-compressed tensors do not compress: pass ``--full-ratio 1`` for them.
TYPICAL_FULL_RATIO = 0.671
#: Requests the commit makes in sequence after the payload is up: the manifest's
#: create (If-None-Match), a read of LATEST, and its compare-and-swap (If-Match).
COMMIT_ROUND_TRIPS = 3
#: Assumed trainer-to-bucket round trip when none is given: a bucket in the
#: trainer's own region answers small requests in tens of milliseconds. Not a
#: measurement; at GB payloads the commit is noise beside the upload anyway.
DEFAULT_TRAINER_RTT_S = 0.05
#: Megabits per second in one gigabit per second.
MBPS_PER_GBPS = 1000.0


def require_full_ratio(value: float) -> float:
    """A stored/raw ratio in (0, 1]: a lossless codec never needs more than the raw bytes."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)):
        raise UsageError(f"full_ratio must be a number in (0, 1], got {value!r}")
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise UsageError(
            f"full_ratio must be in (0, 1] (stored over raw bytes of a full snapshot), "
            f"got {value!r}"
        )
    return float(value)


@dataclass(frozen=True)
class TrainerUplink:
    """The trainer's ranks uploading one version in balanced shares, then one commit."""

    ranks: int
    per_rank_gbps: float
    rtt_s: float = DEFAULT_TRAINER_RTT_S

    def __post_init__(self) -> None:
        require_int("trainer_ranks", self.ranks)
        require_positive("trainer_uplink_gbps", self.per_rank_gbps)
        require_non_negative("trainer_rtt_s", self.rtt_s)

    @property
    def aggregate_mbps(self) -> float:
        """R shares in parallel: R x one rank's rate, if the endpoint keeps up."""
        return self.ranks * self.per_rank_gbps * MBPS_PER_GBPS

    @property
    def commit_s(self) -> float:
        """The commit's requests, one after the other, after the last share is up."""
        return COMMIT_ROUND_TRIPS * self.rtt_s

    def publish_s(self, payload_gb: float, copies: int = 1) -> float:
        """Upload ``copies`` of the payload (one per region bucket) at R x the rate, then commit."""
        require_int("copies", copies)
        return transfer_s(payload_gb * copies, self.aggregate_mbps) + self.commit_s
