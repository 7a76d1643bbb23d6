"""Flags and helpers that several subcommands share."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ..fetch.subscriber import Subscriber
from ..format import layout
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


version_number = _number_type(
    _ascii_int,
    lambda v: 0 <= v <= layout.MAX_VERSION,
    f"a version number (0 to {layout.MAX_VERSION})",
)


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
        value: int | str = version_number(text)
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


class _Renamed(argparse.Action):
    """An option's old spelling: hidden from ``--help``, acting as the new one, with one
    warning on stderr (configs and scripts written for the old name keep working)."""

    def __init__(self, option_strings: list[str], dest: str, *, target: argparse.Action) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=target.nargs,
            const=target.const,
            default=argparse.SUPPRESS,  # the new option's default stands
            help=argparse.SUPPRESS,
            metavar=target.metavar,
        )
        self.target = target

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        new = self.target.option_strings[0]
        if option_string not in _warned_options:
            _warned_options.add(str(option_string))
            print(f"wanrl-s3: warning: {option_string} is deprecated: use {new}", file=sys.stderr)
        self.target(parser, namespace, values, new)


_warned_options: set[str] = set()


def add_renamed_option(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept ``old`` as a hidden, deprecated spelling of the option ``new`` already added."""
    target = next(a for a in parser._actions if new in a.option_strings)
    parser.add_argument(old, dest=f"_renamed_{target.dest}", action=_Renamed, target=target)


STORE_URLS = (
    "s3://bucket/prefix, gs://bucket/prefix, az://container[@account]/prefix, "
    "file:///path or memory://name"
)


def add_store_args(
    parser: argparse.ArgumentParser,
    *,
    required: bool = True,
    verify: str | None = None,
    reader: bool = True,
) -> None:
    """``--store`` and the flags that reach it; ``verify``: what ``--verify-key`` does in
    this command, or None for a command that checks no signature (then it has no such flag);
    ``reader``: also ``--run`` (the run to follow), for a command that reads versions."""
    g = parser.add_argument_group("store")
    either = "" if required else " (this or --regions FILE)"
    g.add_argument(
        "--store", required=required, metavar="URL", help=f"the store: {STORE_URLS}{either}"
    )
    g.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=None,  # not $AWS_ENDPOINT_URL here: that would send gs:// and az:// there too
        help="the service's endpoint: an S3-compatible one for s3:// (R2, MinIO, SeaweedFS ...), "
        "the API endpoint for gs:// (an emulator), the account URL for az:// (Azurite, a "
        "private endpoint) (default for s3://: $AWS_ENDPOINT_URL, else AWS; for the others "
        "the provider's own)",
    )
    g.add_argument(
        "--profile",
        metavar="NAME",
        default=None,
        help="AWS profile, s3:// only (default: the credential chain)",
    )
    if verify is not None:
        g.add_argument(
            "--verify-key",
            metavar="PUBLIC.pem",
            default=None,
            action=OnceKeyring,
            help="an Ed25519 public key, or a keyring file of several (`wanrl-s3 keygen`): "
            + verify
            + ("" if "(default:" in verify else " (default: signatures not checked)"),
        )
    if reader:
        g.add_argument(
            "--run",
            metavar="RUN_ID",
            default=None,
            type=run_arg,
            help="read only versions of this run (the run id of its first version; `inspect` "
            "shows it) and refuse any other run's, even the first time (default: with "
            "--verify-key, the run of the first LATEST read; without, any run)",
        )
    g.add_argument(
        "--s3-region",
        metavar="NAME",
        default=None,
        help="S3 region for request signing, s3:// only (default: the profile's)",
    )


def add_regions_arg(parser: argparse.ArgumentParser, what: str) -> None:
    """``--regions FILE``, the alternative to ``--store`` (which then is not required)."""
    parser.add_argument(
        "--regions",
        metavar="FILE",
        default=None,
        help="a regions file (TOML, `terraform output -raw regions_toml`) instead of "
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


def add_read_concurrency_arg(parser: argparse.ArgumentParser) -> None:
    """``--concurrency`` of a command that downloads a version (pull, worker)."""
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=16,
        metavar="N",
        help="ranged GETs in flight at once",
    )


def add_region_arg(parser: argparse.ArgumentParser, without_regions: str) -> None:
    parser.add_argument(
        "--region",
        metavar="NAME|auto",
        default=None,
        help="with --regions: the region to read from, or 'auto': the fastest by latency "
        f"and throughput measured at start-up; without --regions: {without_regions} "
        "(default: auto with --regions)",
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
    key = getattr(args, "verify_key", None)  # absent where the command checks no signature
    return Verifier.from_file(key) if key else None


def emit_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000
    return f"{n:.2f} TB"  # pragma: no cover
