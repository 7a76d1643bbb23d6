"""What one estimate depends on: :class:`PlanInputs`, and the topology names it prices.

Kept apart from the formulas (:mod:`.timing`, :mod:`.traffic`, :mod:`.plan`) so
each of them can read the inputs without importing the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UsageError
from ..staleness import MIN_STALENESS
from ..units import require_int, require_non_negative, require_positive
from . import capacity as cap
from . import fleet as fleet_model
from . import topology
from .cdn import DEFAULT_EDGES
from .publication import (
    DEFAULT_TRAINER_RTT_S,
    TYPICAL_FULL_RATIO,
    TrainerUplink,
    require_full_ratio,
)
from .reads import require_prefixes

#: Topology names, in the order the report prints them.
TOPOLOGIES = (
    "object_storage_full", "object_storage_delta", "cdn_full", "cdn_delta", "star", "peer_chain",
)  # fmt: skip
LABELS = {
    "object_storage_full": "object storage full",
    "object_storage_delta": "object storage delta",
    "cdn_full": "CDN full",
    "cdn_delta": "CDN delta",
    "star": "star",
    "peer_chain": "peer chain",
}
#: Rows served through object storage (uploads, retained versions), with or without a CDN.
BUCKET_ROWS = ("object_storage_full", "object_storage_delta", "cdn_full", "cdn_delta")
#: The routes wanrl-s3 ships (``pull``/``worker``, with ``--cdn-url`` for the CDN rows): the
#: only ones recommended unless ``include_unshipped``. The others are modelled for comparison.
SHIPPED_ROWS = BUCKET_ROWS
#: How the report labels a row wanrl-s3 does not ship.
UNSHIPPED = "modelled, not shipped by wanrl-s3"
CDN_ROWS = ("cdn_full", "cdn_delta")
DELTA_ROWS = ("object_storage_delta", "cdn_delta")
#: The trainer's link is bought flat (no per-GB egress), e.g. an on-premises uplink.
FLAT_RATE = "flat"
#: Give up sizing past this many workers: the answer is "no fleet", not a number.
MAX_WORKERS = 1_000_000


@dataclass(frozen=True)
class PlanInputs:
    """Everything one estimate depends on; validated on creation, never mutated."""

    params: float
    t_train_s: float
    batch: int
    bytes_per_param: float = 2.0
    density: float = 0.05
    staleness: int = MIN_STALENESS
    force: bool = False
    worker_rollouts_per_s: float = 0.33
    gamma: float = 1.1
    workers: int | None = None
    downlink_mbps: float = 100.0
    uplink_mbps: float = 300.0
    upload_mbps: float | None = None
    chunk_mb: float = 64.0
    # The publisher's --payload-prefixes: each version's objects dealt over K prefixes
    payload_prefixes: int = 1
    provider: str = "aws"
    trainer_provider: str | None = None
    regions: int = 1
    replicate: bool = False
    replication_lag_s: float = 0.0
    steps: int = 100
    t_bcast_s: float | None = None
    trainer_gpus: tuple[tuple[str, int], ...] = (("A100-80GB", 4),)
    worker_gpu: str = "RTX-5090"
    relay_usd_per_gb: float = 0.0
    keyframe_every: int = 10
    retained_versions: int = 2
    poll_interval_s: float = 10.0
    cdn: str | None = None
    cdn_edges: int = DEFAULT_EDGES
    # An edge's round trip to the bucket on a miss, ms; the CDN rows wait for two (cdn.py).
    cdn_fill_rtt_ms: float = 0.0
    # The store's own time to answer a request, ms: a part of each fleet worker's rtt_ms
    # that an edge answering from its cache skips (cdn.py). Needs a fleet.
    store_answer_ms: float = 0.0
    replica_regions: tuple[str, ...] = ()
    free_tier: bool = True
    # A heterogeneous fleet (--fleet / --from-status): T_bcast at bcast_fraction of it.
    fleet: fleet_model.FleetLinks | None = None
    bcast_fraction: float = 0.9
    install_mb_per_s: float = fleet_model.DEFAULT_INSTALL_MB_PER_S
    chains: int | None = None
    batch_wait_s: float = 0.0  # each worker's wait for a batch boundary to install at
    # Share of the trajectories reaching the learner that it drops as too old (capacity.py).
    dropped_fraction: float = 0.0
    # Coded full versions and the trainer's own publication (cost/publication.py).
    full_ratio: float = TYPICAL_FULL_RATIO
    trainer_ranks: int = 1
    trainer_uplink_gbps: float | None = None
    trainer_rtt_s: float = DEFAULT_TRAINER_RTT_S
    # T_bcast measured per topology on this fleet ((row name, seconds), e.g. from
    # benchmarks/wan_fleet.py): replaces that row's model, so the recommendation can be
    # checked against what was measured. Only with a fixed fleet (workers or fleet).
    measured_t_bcast_s: tuple[tuple[str, float], ...] = ()
    # Rank the modelled routes wanrl-s3 does not ship (the star, the peer chain) too; by
    # default they are priced for comparison and never recommended.
    include_unshipped: bool = False

    def __post_init__(self) -> None:
        topology.payload_gb(self.params, self.bytes_per_param, self.density)
        self._check_fleet()
        self._check_publication()
        for name in ("t_train_s", "worker_rollouts_per_s", "downlink_mbps", "uplink_mbps"):
            require_positive(name, getattr(self, name))
        for name in ("chunk_mb", "poll_interval_s"):
            require_positive(name, getattr(self, name))
        for name in (
            "batch", "regions", "steps", "keyframe_every", "retained_versions", "cdn_edges",
        ):  # fmt: skip
            require_int(name, getattr(self, name))
        if self.replica_regions and self.regions != 1 + len(self.replica_regions):
            raise UsageError(
                f"regions must be 1 + the {len(self.replica_regions)} replica regions named, "
                f"got {self.regions} (leave --region-count out when naming --replica-regions)"
            )
        require_non_negative("replication_lag_s", self.replication_lag_s)
        require_non_negative("cdn_fill_rtt_ms", self.cdn_fill_rtt_ms)
        require_non_negative("relay_usd_per_gb", self.relay_usd_per_gb)
        if self.upload_mbps is not None:
            require_positive("upload_mbps", self.upload_mbps)
        if self.workers is not None:
            require_int("workers", self.workers)
        if self.t_bcast_s is not None:
            require_non_negative("t_bcast_s", self.t_bcast_s)
        require_prefixes(self.payload_prefixes)
        cap.require_gamma(self.gamma)
        cap.require_dropped_fraction(self.dropped_fraction)
        for gpu, count in self.trainer_gpus:
            require_int(f"trainer GPU count of {gpu}", count)
        cap.staleness_budget(staleness=self.staleness, force=self.force)

    def _check_fleet(self) -> None:
        fleet_model.quantile_index(1, self.bcast_fraction)
        for name, seconds in self.measured_t_bcast_s:
            if name not in TOPOLOGIES:
                raise UsageError(
                    f"measured_t_bcast_s names {name!r}; known: {', '.join(TOPOLOGIES)}"
                )
            require_non_negative(f"measured_t_bcast_s[{name!r}]", seconds)
        if self.measured_t_bcast_s and self.workers is None:
            raise UsageError("measured_t_bcast_s needs a fixed fleet (workers, or a fleet file)")
        require_positive("install_mb_per_s", self.install_mb_per_s)
        require_non_negative("batch_wait_s", self.batch_wait_s)
        if self.chains is not None:
            require_int("chains", self.chains)
        if self.fleet is not None and self.workers != len(self.fleet):
            raise UsageError(f"workers must be the fleet's {len(self.fleet)}, got {self.workers}")
        self._check_store_answer()

    def _check_store_answer(self) -> None:
        answer_ms = require_non_negative("store_answer_ms", self.store_answer_ms)
        if not answer_ms:
            return
        if self.fleet is None:
            raise UsageError(
                "store_answer_ms needs a fleet (--fleet or --from-status): without one the "
                "bucket rows model no round trips for an edge to shorten"
            )
        quickest = min(self.fleet.workers, key=lambda w: w.rtt_ms)
        if answer_ms > quickest.rtt_ms:
            raise UsageError(
                f"store_answer_ms {answer_ms:g} is part of each worker's rtt_ms, so it cannot "
                f"exceed the smallest ({quickest.name}: {quickest.rtt_ms:g} ms)"
            )

    def _check_publication(self) -> None:
        require_full_ratio(self.full_ratio)
        require_int("trainer_ranks", self.trainer_ranks)
        require_non_negative("trainer_rtt_s", self.trainer_rtt_s)
        if self.trainer_uplink_gbps is None:
            if self.trainer_ranks != 1:
                raise UsageError(
                    f"trainer_ranks={self.trainer_ranks} needs trainer_uplink_gbps "
                    "(each rank's upload rate, Gbit/s)"
                )
            return
        require_positive("trainer_uplink_gbps", self.trainer_uplink_gbps)
        if self.upload_mbps is not None:
            raise UsageError(
                "give upload_mbps (one uploader) or trainer_uplink_gbps (per trainer rank), "
                "not both"
            )

    @property
    def trainer_uplink(self) -> TrainerUplink | None:
        """The ranks' publication model, or None: upload at ``upload_mbps`` as one stream."""
        if self.trainer_uplink_gbps is None:
            return None
        return TrainerUplink(self.trainer_ranks, self.trainer_uplink_gbps, self.trainer_rtt_s)

    @property
    def fetch(self) -> fleet_model.FetchModel:
        """The fetch model these inputs imply: their poll interval, install rate and batch wait."""
        return fleet_model.FetchModel(
            self.poll_interval_s,
            install_mb_per_s=self.install_mb_per_s,
            batch_wait_s=self.batch_wait_s,
        )

    @property
    def budget(self) -> cap.StalenessBudget:
        """The staleness budget S, kappa = S - 1, and its warning outside the measured envelope."""
        return cap.staleness_budget(staleness=self.staleness, force=self.force)

    @property
    def kappa(self) -> int:
        """Training steps between publications: kappa = S - 1 for the staleness budget S."""
        return self.staleness - 1

    @property
    def snapshot_gb(self) -> float:
        """A full snapshot's size, GB: ``params`` at ``bytes_per_param`` each, uncoded."""
        return topology.snapshot_gb(self.params, self.bytes_per_param)

    @property
    def full_gb(self) -> float:
        """Bytes a full version moves and occupies: the snapshot, coded at ``full_ratio``."""
        return self.snapshot_gb * self.full_ratio

    @property
    def delta_gb(self) -> float:
        """What a sparse delta ships, GB: the changed ``density`` share of the snapshot."""
        return topology.payload_gb(self.params, self.bytes_per_param, self.density)

    @property
    def delta_row_gb(self) -> float:
        """What a delta row ships per publication: the delta, or the coded full version if smaller.

        ``--delta auto`` publishes a full version when a delta does not pay; the
        planner takes the smaller of the two as the best that rule can do.
        """
        return min(self.delta_gb, self.full_gb)

    @property
    def window_s(self) -> float:
        """Seconds one publication period lasts (kappa training steps): broadcast and rollouts
        must fit in it."""
        return self.kappa * self.t_train_s

    @property
    def publications(self) -> int:
        """Publications in the run: one every kappa steps."""
        return math.ceil(self.steps / self.kappa)
