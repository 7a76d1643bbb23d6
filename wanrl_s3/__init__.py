"""wanrl-s3: policy snapshots for WAN rollout fleets, through S3-compatible buckets.

This module is the public API: every name in ``__all__`` and nothing else.
Modules below it are private and may move; the subpackages ``wanrl_s3.cdn``
(CDN signers and the grants workers hold), ``wanrl_s3.codec`` (pure codecs),
``wanrl_s3.cost`` (the planner's formulas), ``wanrl_s3.store`` (the store
protocol, for backend authors) and ``wanrl_s3.testing`` (local endpoints,
synthetic policies, the store contract suite) are public too, each through its
own ``__all__``.

One table, ``_PUBLIC``, names each public name and the private module that
defines it; ``__all__`` and ``dir()`` are its keys, and a name is imported on
first use, so ``import wanrl_s3`` stays cheap (the CLI's ``estimate`` never
loads boto3 or numpy's heavier users). ``_RENAMED`` keeps the old spellings of
renamed names importable, with a DeprecationWarning, and out of ``__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._exports import attach

# public name -> the private module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    # trainer side: publishing
    "DELTA_MODES": ".publish.publisher",
    "PublishConfig": ".publish.publisher",
    "PublishResult": ".publish.publisher",
    "Publisher": ".publish.publisher",
    "ShardedPublisher": ".publish.shard",
    "ShareSelector": ".publish.assign",
    "adopt_newest": ".publish.adopt",
    "adoption_point": ".publish.adopt",
    "AdoptionPoint": ".publish.adopt",
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
    "HostCache": ".fetch.host_cache",
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
    "FailoverConfig": ".regions.failover",
    "RegionFailover": ".regions.failover",
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
    "FailureSpan": ".fleet.status",
    "StatusReporter": ".fleet.status",
    "check_worker_id": ".format.layout",
    "WorkerStatus": ".fleet.status",
    "fleet_report": ".fleet.broadcast_times",
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
    # errors: one tree, each class with its CLI exit code
    "WanrlError": ".errors",
    "UsageError": ".errors",
    "LocalIOError": ".errors",
    "StoreError": ".errors",
    "StoreGuaranteeError": ".errors",
    "NotFoundError": ".errors",
    "ObjectTooLargeError": ".errors",
    "ManifestError": ".errors",
    "VerificationError": ".errors",
    "SignatureError": ".errors",
    "VersionConflictError": ".errors",
    "PublicationFailedError": ".errors",
    "InfeasiblePlanError": ".errors",
    "WorkerStatusError": ".errors",
    "FetchCancelled": ".errors",
}

# old spelling -> public name: still importable, with a DeprecationWarning, never listed
_RENAMED: dict[str, str] = {
    "NodeShare": "HostCache",
    "resume": "adopt_newest",
    "resume_point": "adoption_point",
    "ResumePoint": "AdoptionPoint",
}

if TYPE_CHECKING:
    from .cost.plan import Plan as Plan
    from .cost.plan import PlanInputs as PlanInputs
    from .cost.plan import estimate as estimate
    from .cost.prices import load_prices as load_prices
    from .errors import FetchCancelled as FetchCancelled
    from .errors import InfeasiblePlanError as InfeasiblePlanError
    from .errors import LocalIOError as LocalIOError
    from .errors import ManifestError as ManifestError
    from .errors import NotFoundError as NotFoundError
    from .errors import ObjectTooLargeError as ObjectTooLargeError
    from .errors import PublicationFailedError as PublicationFailedError
    from .errors import SignatureError as SignatureError
    from .errors import StoreError as StoreError
    from .errors import StoreGuaranteeError as StoreGuaranteeError
    from .errors import UsageError as UsageError
    from .errors import VerificationError as VerificationError
    from .errors import VersionConflictError as VersionConflictError
    from .errors import WanrlError as WanrlError
    from .errors import WorkerStatusError as WorkerStatusError
    from .fetch.files import load_snapshot as load_snapshot
    from .fetch.files import local_snapshot as local_snapshot
    from .fetch.files import pull_to_file as pull_to_file
    from .fetch.host_cache import HostCache as HostCache
    from .fetch.install_dir import DirectoryInstaller as DirectoryInstaller
    from .fetch.subscriber import Snapshot as Snapshot
    from .fetch.subscriber import Subscriber as Subscriber
    from .fetch.watch import InstallResult as InstallResult
    from .fetch.watch import WatchConfig as WatchConfig
    from .fetch.watch import Watcher as Watcher
    from .fetch.watch import WatchObserver as WatchObserver
    from .fleet.broadcast_times import fleet_report as fleet_report
    from .fleet.status import FailureSpan as FailureSpan
    from .fleet.status import StatusReporter as StatusReporter
    from .fleet.status import WorkerStatus as WorkerStatus
    from .fleet.status import read_statuses as read_statuses
    from .fleet.steps import StepStatusWriter as StepStatusWriter
    from .fleet.steps import VersionMap as VersionMap
    from .format.layout import check_worker_id as check_worker_id
    from .format.signing import Signer as Signer
    from .format.signing import Verifier as Verifier
    from .format.signing import generate_keypair as generate_keypair
    from .io.hf_model import find_model_config as find_model_config
    from .io.hf_model import model_params as model_params
    from .io.malloc import return_big_buffers as return_big_buffers
    from .io.safetensors_file import SafetensorsFile as SafetensorsFile
    from .io.safetensors_file import write_file as write_file
    from .io.tensors import to_numpy as to_numpy
    from .io.tensors import to_torch as to_torch
    from .metrics.exposition import MetricsServer as MetricsServer
    from .metrics.exposition import serve_metrics as serve_metrics
    from .metrics.relay import RelayMetrics as RelayMetrics
    from .metrics.staleness import StalenessMetrics as StalenessMetrics
    from .metrics.trainer import TrainerMetrics as TrainerMetrics
    from .metrics.worker import WorkerMetrics as WorkerMetrics
    from .publish.adopt import AdoptionPoint as AdoptionPoint
    from .publish.adopt import adopt_newest as adopt_newest
    from .publish.adopt import adoption_point as adoption_point
    from .publish.assign import ShareSelector as ShareSelector
    from .publish.publisher import DELTA_MODES as DELTA_MODES
    from .publish.publisher import PublishConfig as PublishConfig
    from .publish.publisher import Publisher as Publisher
    from .publish.publisher import PublishResult as PublishResult
    from .publish.shard import ShardedPublisher as ShardedPublisher
    from .regions.config import Region as Region
    from .regions.config import RegionsConfig as RegionsConfig
    from .regions.config import load_regions as load_regions
    from .regions.failover import FailoverConfig as FailoverConfig
    from .regions.failover import RegionFailover as RegionFailover
    from .regions.probe import choose_region as choose_region
    from .regions.roles import StoreRoles as StoreRoles
    from .regions.roles import store_roles as store_roles
    from .staleness import StalenessConfig as StalenessConfig
    from .staleness import StalenessFilter as StalenessFilter
    from .staleness import Tagged as Tagged
    from .staleness import check_staleness as check_staleness
    from .staleness import is_admissible as is_admissible
    from .store import ObjectStore as ObjectStore
    from .store import RetryPolicy as RetryPolicy
    from .store import open_store as open_store
    from .trainer.host_copy import PUBLISH_DTYPES as PUBLISH_DTYPES
    from .trainer.observer import PublicationObserver as PublicationObserver
    from .trainer.protocol import VersionPublisher as VersionPublisher
    from .trainer.publication import Publication as Publication
    from .trainer.publication import TrainerPublisher as TrainerPublisher
    from .trainer.ranks import RankGroup as RankGroup
else:  # hidden from type checkers, so that a misspelt name is an error there
    __getattr__, __dir__, __all__ = attach(__name__, _PUBLIC, _RENAMED)
