"""Flags and helpers that several subcommands share."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..signing import Verifier
from ..store import ObjectStore, open_store
from ..subscriber import Subscriber


def add_store_args(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    g = parser.add_argument_group("store")
    g.add_argument("--store", required=required, metavar="URL",
                   help="s3://bucket/prefix, file:///path or memory://name")
    g.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"),
                   help="S3-compatible endpoint (R2, GCS, MinIO ...); default: "
                        "$AWS_ENDPOINT_URL or AWS")
    g.add_argument("--profile", default=None, help="AWS profile (default: the credential chain)")
    g.add_argument("--verify-key", metavar="PUBLIC.pem", default=None,
                   help="refuse any version not signed by this Ed25519 public key")
    g.add_argument("--s3-region", default=None,
                   help="S3 region name for request signing (default: from the profile)")


def open_from_args(args: argparse.Namespace, url: str | None = None) -> ObjectStore:
    return open_store(url or args.store, endpoint_url=args.endpoint_url, profile=args.profile,
                      region=args.s3_region)


def subscriber_from_args(args: argparse.Namespace, store: ObjectStore | None = None,
                         **kwargs: Any) -> Subscriber:
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
