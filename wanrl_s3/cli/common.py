"""Flags and helpers that several subcommands share."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ..fetch.subscriber import Subscriber
from ..format.manifest import RUN_ID_RE
from ..format.manifests import Manifests
from ..format.signing import Verifier
from ..regions.config import RegionsConfig
from ..regions.probe import RegionChoice
from ..regions.roles import StoreRoles, store_roles
from ..store import ObjectStore, open_store


def _number_type(
    parse: Callable[[str], float], ok: Callable[[float], bool], what: str
) -> Callable[[str], Any]:
    """An argparse ``type=`` that refuses, as one usage line, what ``ok`` rejects."""

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except (ValueError, OverflowError):
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    convert.__name__ = what
    return convert


def _ascii_int(text: str) -> int:
    """int() of plain ASCII digits only (int() also takes '١٢'; isdigit() also '²')."""
    if not text.strip().lstrip("+-").isascii():
        raise ValueError(text)
    return int(text)


# Numbers on the command line: NaN, infinities and meaningless negatives are refused
# by argparse, before any I/O, instead of surfacing later as a traceback or a hang.
positive_float = _number_type(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
non_negative_float = _number_type(
    float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0"
)
positive_int = _number_type(_ascii_int, lambda v: v >= 1, "an integer >= 1")
non_negative_int = _number_type(_ascii_int, lambda v: v >= 0, "an integer >= 0")


def run_arg(text: str) -> str:
    """``--run``: a run id as manifests write it."""
    if not RUN_ID_RE.match(text):
        raise argparse.ArgumentTypeError(
            f"expected a run id (1-128 letters, digits, '.', '_' or '-'), got {text!r}"
        )
    return text


def version_arg(text: str) -> int | str:
    """``--version``: a version number (ASCII digits) or ``latest``."""
    if text == "latest":
        return text
    try:
        value: int | str = non_negative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a version number or 'latest', got {text!r}"
        ) from None
    return value


class Once(argparse.Action):
    """Store the flag's value, and refuse the flag a second time.

    argparse keeps the last of repeated flags silently; for a flag like
    ``--verify-key`` that would drop a key the user meant to require.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        seen = f"_seen_{self.dest}"
        if getattr(namespace, seen, False):
            parser.error(f"{option_string} given twice; {self.help_twice}")
        setattr(namespace, seen, True)
        setattr(namespace, self.dest, values)

    help_twice = "give it once"


class OnceKeyring(Once):
    help_twice = "to trust several keys, put their PEM blocks in one file (a keyring)"


def add_store_args(
    parser: argparse.ArgumentParser, *, required: bool = True, reader: bool = True
) -> None:
    """--store and how to reach it; ``reader``: also --run (the run to follow)."""
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
        action=OnceKeyring,
        help="refuse any version not signed by this Ed25519 public key (or by one of "
        "the keys of this keyring file); a changed file is reloaded at the next read",
    )
    if reader:
        g.add_argument(
            "--run",
            metavar="RUN_ID",
            default=None,
            type=run_arg,
            help="read only versions of this run (the run id of its first version; `inspect` "
            "shows it) and refuse any other run's, even the first time; with --verify-key "
            "and no --run, the run of the first LATEST read",
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
    return Subscriber(
        store or open_from_args(args),
        verifier=verifier_from_args(args),
        run=getattr(args, "run", None),
        **kwargs,
    )


def manifests_from_args(args: argparse.Namespace, store: ObjectStore | None = None) -> Manifests:
    """The manifest reader of ``--store`` (signatures required with ``--verify-key``): for a
    command that reads manifests and no payload."""
    return Manifests(
        store or open_from_args(args),
        verifier=verifier_from_args(args),
        run=getattr(args, "run", None),
    )


def verifier_from_args(args: argparse.Namespace) -> Verifier | None:
    """--verify-key's keyring, reloaded when its file changes; None without the flag."""
    return Verifier.from_file(args.verify_key) if args.verify_key else None


def emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000
    return f"{n:.2f} TB"  # pragma: no cover
