"""Flags and helpers that several subcommands share."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import UsageError
from ..fetch.subscriber import Subscriber
from ..format.signing import Verifier
from ..regions.config import RegionsConfig
from ..regions.probe import RegionChoice
from ..regions.roles import StoreRoles, store_roles
from ..store import ObjectStore, open_store


def add_store_args(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    g = parser.add_argument_group("store")
    g.add_argument(
        "--store",
        required=required,
        metavar="URL",
        help="s3://bucket/prefix, file:///path or memory://name",
    )
    g.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="S3-compatible endpoint (R2, GCS, MinIO ...); default: $AWS_ENDPOINT_URL or AWS",
    )
    g.add_argument("--profile", default=None, help="AWS profile (default: the credential chain)")
    g.add_argument(
        "--verify-key",
        metavar="PUBLIC.pem",
        default=None,
        help="refuse any version not signed by this Ed25519 public key",
    )
    g.add_argument(
        "--s3-region",
        default=None,
        help="S3 region name for request signing (default: from the profile)",
    )


def add_regions_arg(parser: argparse.ArgumentParser, what: str) -> None:
    """``--regions FILE``, the alternative to ``--store`` (which then is not required)."""
    parser.add_argument(
        "--regions",
        metavar="FILE",
        default=None,
        help="a regions file (`terraform output -raw regions_toml`) instead of "
        f"--store: {what}; its per-region endpoint and profile apply",
    )


def roles_from_args(args: argparse.Namespace) -> StoreRoles:
    """The run's stores by role: exactly one of --store and --regions."""
    regions = getattr(args, "regions", None)
    if regions is None and not args.store:
        raise UsageError("give --store URL, or --regions FILE")
    if regions is not None and args.store:
        raise UsageError(
            "--store and --regions exclude each other: the regions file names every store"
        )
    return store_roles(
        args.store,
        regions=regions,
        endpoint_url=args.endpoint_url,
        profile=args.profile,
        region=args.s3_region,
    )


def add_region_arg(parser: argparse.ArgumentParser, without_regions: str) -> None:
    parser.add_argument(
        "--region",
        metavar="NAME|auto",
        default=None,
        help="with --regions: the region to read from, or 'auto' (the default): "
        "the fastest by latency and throughput measured at start-up; "
        f"without --regions: {without_regions}",
    )


def store_to_read(
    args: argparse.Namespace, *, max_lag_versions: int | None = None
) -> tuple[ObjectStore, RegionsConfig | None, RegionChoice | None]:
    """--store, or the region of --regions that --region names or measuring picks."""
    roles = roles_from_args(args)
    store, choice = roles.read(args.region, max_lag_versions=max_lag_versions)
    return store, roles.regions, choice


def open_from_args(args: argparse.Namespace, url: str | None = None) -> ObjectStore:
    return open_store(
        url or args.store,
        endpoint_url=args.endpoint_url,
        profile=args.profile,
        region=args.s3_region,
    )


def subscriber_from_args(
    args: argparse.Namespace, store: ObjectStore | None = None, **kwargs: Any
) -> Subscriber:
    verifier = Verifier.from_file(args.verify_key) if args.verify_key else None
    return Subscriber(store or open_from_args(args), verifier=verifier, **kwargs)


def emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000
    return f"{n:.2f} TB"  # pragma: no cover
