"""wanrl-s3: policy snapshots for WAN rollout fleets, through S3-compatible buckets."""

from __future__ import annotations

from .errors import (
    InfeasiblePlanError,
    ManifestError,
    NotFoundError,
    SignatureError,
    StoreError,
    UsageError,
    VerificationError,
    VersionConflictError,
    WanrlError,
)

__all__ = [
    "InfeasiblePlanError",
    "ManifestError",
    "NotFoundError",
    "SignatureError",
    "StoreError",
    "UsageError",
    "VerificationError",
    "VersionConflictError",
    "WanrlError",
]
