"""wanrl-s3: policy snapshots for WAN rollout fleets, through S3-compatible buckets.

This module is the public API: every name in ``__all__`` and nothing else.
Modules below it are private and may move; the subpackages ``wanrl_s3.codec``
(pure codecs), ``wanrl_s3.cost`` (the planner's formulas), ``wanrl_s3.store``
(the store protocol, for backend authors) and ``wanrl_s3.testing`` (local
endpoints, synthetic policies, the store contract suite) are public too, each
through its own ``__all__``.

Names are imported on first use, so ``import wanrl_s3`` stays cheap (the CLI's
``estimate`` never loads boto3 or numpy's heavier users).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    FetchCancelled,
    InfeasiblePlanError,
    LocalIOError,
    ManifestError,
    NotFoundError,
    PublicationFailedError,
    SignatureError,
    StoreError,
    StoreGuaranteeError,
    UsageError,
    VerificationError,
    VersionConflictError,
    WanrlError,
    WorkerStatusError,
)

# public name -> the private module that defines it (imported lazily)
_LAZY: dict[str, str] = {
    # trainer side: publishing
    "DELTA_MODES": ".publish.publisher",
    "PublishConfig": ".publish.publisher",
    "PublishResult": ".publish.publisher",
    "Publisher": ".publish.publisher",
    "ShardedPublisher": ".publish.shard",
    "ShareSelector": ".publish.assign",
    "resume": ".publish.resume",
    "resume_point": ".publish.resume",
    "ResumePoint": ".publish.resume",
    # the trainer core: what any trainer calls
    "TrainerPublisher": ".trainer.publication",
    "Publication": ".trainer.publication",
    "VersionPublisher": ".trainer.protocol",
    "PublicationObserver": ".trainer.observer",
    "RankGroup": ".trainer.ranks",
    "PUBLISH_DTYPES": ".trainer.host_copy",
    # worker side: fetching and installing
    "Snapshot": ".fetch.subscriber",
    "Subscriber": ".fetch.subscriber",
    "InstallResult": ".fetch.watch",
    "WatchConfig": ".fetch.watch",
    "Watcher": ".fetch.watch",
    "WatchObserver": ".fetch.watch",
    "NodeShare": ".fetch.node_share",
    "DirectoryInstaller": ".fetch.install_dir",
    "load_snapshot": ".fetch.files",
    "local_snapshot": ".fetch.files",
    "pull_to_file": ".fetch.files",
    # stores and regions
    "ObjectStore": ".store",
    "RetryPolicy": ".store",
    "open_store": ".store",
    "Region": ".regions.config",
    "RegionsConfig": ".regions.config",
    "load_regions": ".regions.config",
    "choose_region": ".regions.probe",
    "StoreRoles": ".regions.roles",
    "store_roles": ".regions.roles",
    # signing
    "Signer": ".format.signing",
    "Verifier": ".format.signing",
    "generate_keypair": ".format.signing",
    # tensors and files
    "SafetensorsFile": ".io.safetensors_file",
    "write_file": ".io.safetensors_file",
    "to_numpy": ".io.tensors",
    "to_torch": ".io.tensors",
    "return_big_buffers": ".io.malloc",
    "find_model_config": ".io.hf_model",
    "model_params": ".io.hf_model",
    # the fleet and the learner
    "StatusReporter": ".fleet.status",
    "check_worker_id": ".format.layout",
    "WorkerStatus": ".fleet.status",
    "FailureSpan": ".fleet.status",
    "fleet_report": ".fleet.bcast",
    "read_statuses": ".fleet.status",
    "StepStatusWriter": ".fleet.steps",
    "VersionMap": ".fleet.steps",
    "StalenessConfig": ".staleness",
    "StalenessFilter": ".staleness",
    "Tagged": ".staleness",
    "check_staleness": ".staleness",
    "is_admissible": ".staleness",
    # metrics for the people who run it (prometheus-client: the "metrics" extra)
    "MetricsServer": ".metrics.exposition",
    "serve_metrics": ".metrics.exposition",
    "WorkerMetrics": ".metrics.worker",
    "RelayMetrics": ".metrics.relay",
    "TrainerMetrics": ".metrics.trainer",
    "StalenessMetrics": ".metrics.staleness",
    # the planner
    "PlanInputs": ".cost.plan",
    "Plan": ".cost.plan",
    "estimate": ".cost.plan",
    "load_prices": ".cost.prices",
}

if TYPE_CHECKING:
    from .cost.plan import Plan, PlanInputs, estimate
    from .cost.prices import load_prices
    from .fetch.files import load_snapshot, local_snapshot, pull_to_file
    from .fetch.install_dir import DirectoryInstaller
    from .fetch.node_share import NodeShare
    from .fetch.subscriber import Snapshot, Subscriber
    from .fetch.watch import InstallResult, WatchConfig, Watcher, WatchObserver
    from .fleet.bcast import fleet_report
    from .fleet.status import FailureSpan, StatusReporter, WorkerStatus, read_statuses
    from .fleet.steps import StepStatusWriter, VersionMap
    from .format.layout import check_worker_id
    from .format.signing import Signer, Verifier, generate_keypair
    from .io.hf_model import find_model_config, model_params
    from .io.malloc import return_big_buffers
    from .io.safetensors_file import SafetensorsFile, write_file
    from .io.tensors import to_numpy, to_torch
    from .metrics.exposition import MetricsServer, serve_metrics
    from .metrics.relay import RelayMetrics
    from .metrics.staleness import StalenessMetrics
    from .metrics.trainer import TrainerMetrics
    from .metrics.worker import WorkerMetrics
    from .publish.assign import ShareSelector
    from .publish.publisher import DELTA_MODES, PublishConfig, Publisher, PublishResult
    from .publish.resume import ResumePoint, resume, resume_point
    from .publish.shard import ShardedPublisher
    from .regions.config import Region, RegionsConfig, load_regions
    from .regions.probe import choose_region
    from .regions.roles import StoreRoles, store_roles
    from .staleness import (
        StalenessConfig,
        StalenessFilter,
        Tagged,
        check_staleness,
        is_admissible,
    )
    from .store import ObjectStore, RetryPolicy, open_store
    from .trainer.host_copy import PUBLISH_DTYPES
    from .trainer.observer import PublicationObserver
    from .trainer.protocol import VersionPublisher
    from .trainer.publication import Publication, TrainerPublisher
    from .trainer.ranks import RankGroup


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DELTA_MODES",
    "PUBLISH_DTYPES",
    "DirectoryInstaller",
    "FailureSpan",
    "FetchCancelled",
    "InfeasiblePlanError",
    "InstallResult",
    "LocalIOError",
    "ManifestError",
    "MetricsServer",
    "NodeShare",
    "NotFoundError",
    "ObjectStore",
    "Plan",
    "PlanInputs",
    "Publication",
    "PublicationFailedError",
    "PublicationObserver",
    "PublishConfig",
    "PublishResult",
    "Publisher",
    "RankGroup",
    "Region",
    "RegionsConfig",
    "RelayMetrics",
    "ResumePoint",
    "RetryPolicy",
    "SafetensorsFile",
    "ShardedPublisher",
    "ShareSelector",
    "SignatureError",
    "Signer",
    "Snapshot",
    "StalenessConfig",
    "StalenessFilter",
    "StalenessMetrics",
    "StatusReporter",
    "StepStatusWriter",
    "StoreError",
    "StoreGuaranteeError",
    "StoreRoles",
    "Subscriber",
    "Tagged",
    "TrainerMetrics",
    "TrainerPublisher",
    "UsageError",
    "VerificationError",
    "Verifier",
    "VersionConflictError",
    "VersionMap",
    "VersionPublisher",
    "WanrlError",
    "WatchConfig",
    "WatchObserver",
    "Watcher",
    "WorkerMetrics",
    "WorkerStatus",
    "WorkerStatusError",
    "check_staleness",
    "check_worker_id",
    "choose_region",
    "estimate",
    "find_model_config",
    "fleet_report",
    "generate_keypair",
    "is_admissible",
    "load_prices",
    "load_regions",
    "load_snapshot",
    "local_snapshot",
    "model_params",
    "open_store",
    "pull_to_file",
    "read_statuses",
    "resume",
    "resume_point",
    "return_big_buffers",
    "serve_metrics",
    "store_roles",
    "to_numpy",
    "to_torch",
    "write_file",
]
