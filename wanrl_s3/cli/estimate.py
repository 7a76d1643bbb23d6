"""``wanrl-s3 estimate``: size the fleet, time the broadcast and price it, before a run.

Flags left unset fall back to the defaults below (the reference page's 8B
operating point where it has one). A verl run's batch, length and parameter
count come from its trainer YAML through the verl integration's
``python -m wanrl_s3_verl.estimate RUN.yaml [these flags]``: the core knows no
verl keys and needs no YAML parser.
Errors are raised as :class:`~wanrl_s3.errors.WanrlError` subclasses; the
top-level CLI turns them into one line and the class's exit code (2 for bad
input, 5 for an infeasible plan).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import date
from typing import Any

from ..cost import capacity as cap
from ..cost.cdn import DEFAULT_EDGES
from ..cost.freshness import stale_warning
from ..cost.plan import FLAT_RATE, PlanInputs, estimate
from ..cost.prices import NO_CDN, load_prices
from ..cost.publication import COMMIT_ROUND_TRIPS, TYPICAL_FULL_RATIO
from ..errors import UsageError
from .estimate_fleet import add_fleet_flags, fleet_overrides
from .estimate_report import render_text
from .held import tell

_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGT]?)\s*$", re.IGNORECASE)


def parameter_count(text: str) -> float:
    """Accept 8.2e9, 8200000000 or 8.2B (K, M, B/G, T suffixes)."""
    match = _COUNT.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a parameter count: {text!r} (e.g. 8.2e9 or 8.2B)")
    return float(match.group(1)) * _SUFFIX[match.group(2).upper()]


def region_names(text: str) -> tuple[str, ...]:
    """``us-east-2,us-west-2`` -> ("us-east-2", "us-west-2"); empty names are refused."""
    names = tuple(part.strip() for part in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected REGION[,REGION...] without repeats, got {text!r}"
        )
    return names


def gpu_counts(text: str) -> tuple[tuple[str, int], ...]:
    """``A100-80GB:4,H100:2`` -> (("A100-80GB", 4), ("H100", 2))."""
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, count = item.rpartition(":")
        if not sep or not name or not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"expected GPU:COUNT[,GPU:COUNT...], got {text!r}")
        out.append((name, int(count)))
    if not out:
        raise argparse.ArgumentTypeError("expected at least one GPU:COUNT")
    return tuple(out)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "estimate",
        help="fleet size, broadcast time and egress cost per topology, before a run",
        description="Size the fleet, time the broadcast and price it, before a run.",
    )
    _add_model_flags(parser)
    _add_network_flags(parser)
    _add_publication_flags(parser)
    _add_money_flags(parser)
    add_fleet_flags(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--plot", metavar="FILE.png", help="draw T_bcast and cost per run vs fleet")
    parser.set_defaults(func=run)
    return parser


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model and run")
    g.add_argument("--from-verl-config", metavar="FILE", help=argparse.SUPPRESS)  # moved: verl
    g.add_argument("--params", type=parameter_count, metavar="N", help="8.2e9 or 8.2B")
    g.add_argument("--bytes-per-param", type=float, default=2.0, metavar="B", help="default 2")
    g.add_argument("--density", type=float, default=0.05, metavar="F", help="delta (default 0.05)")
    g.add_argument("--t-train-s", type=float, metavar="S", help="seconds per step (required)")
    g.add_argument("--t-bcast-s", type=float, metavar="S", help="measured broadcast seconds")
    budget = g.add_mutually_exclusive_group()
    budget.add_argument("--staleness", type=int, metavar="S", help="budget S (default 3)")
    budget.add_argument("--kappa", type=int, metavar="K", help="steps per publication, S - 1")
    g.add_argument("--force", action="store_true", help="allow S < 3")
    g.add_argument("--batch", type=int, metavar="N", help="trajectories per learner step")
    g.add_argument("--steps", type=int, metavar="N", help="steps in the run (default 100)")
    g.add_argument(
        "--worker-rollouts-per-s",
        type=float,
        default=0.33,
        metavar="R",
        help="per worker, default 0.33",
    )
    g.add_argument("--gamma", type=float, default=1.1, metavar="G", help="default 1.1")
    g.add_argument("--workers", type=int, metavar="N", help="fix the fleet instead of sizing it")


def _add_network_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("network")
    g.add_argument("--downlink-mbps", type=float, default=100.0, metavar="M", help="default 100")
    g.add_argument("--uplink-mbps", type=float, default=300.0, metavar="M", help="B0 (default 300)")
    g.add_argument("--upload-mbps", type=float, metavar="M", help="to bucket (default: uplink)")
    g.add_argument("--chunk-mb", type=float, default=64.0, metavar="MB", help="default 64")
    g.add_argument("--regions", type=int, metavar="N", help="one bucket each (default 1)")
    g.add_argument(
        "--replica-regions",
        type=region_names,
        metavar="R[,R...]",
        help="name the extra regions (priced per region pair; sets --regions)",
    )
    g.add_argument("--replicate", action="store_true", help="upload once, provider replicates")
    g.add_argument("--replication-lag-s", type=float, default=0.0, metavar="S", help="default 0")


def _add_publication_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("publication")
    g.add_argument(
        "--full-ratio",
        type=float,
        default=TYPICAL_FULL_RATIO,
        metavar="R",
        help=f"stored/raw bytes of a full version, in (0, 1] (default {TYPICAL_FULL_RATIO}: "
        "the byte-plane codec on bf16 weights; 1 for incompressible tensors)",
    )
    g.add_argument(
        "--trainer-ranks",
        type=int,
        default=1,
        metavar="N",
        help="trainer ranks that each upload a balanced share of a version (default 1)",
    )
    g.add_argument(
        "--trainer-uplink-gbps",
        type=float,
        metavar="G",
        help="each rank's upload rate, Gbit/s: publish = payload / (N x G) + "
        f"{COMMIT_ROUND_TRIPS} commit round trips (default: one upload at --upload-mbps)",
    )


def _add_money_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("prices")
    g.add_argument(
        "--provider", default="aws", metavar="NAME", help="aws (default), gcs, azure, r2, b2"
    )
    g.add_argument(
        "--trainer-provider",
        metavar="NAME",
        help=f"who bills the trainer's egress (default: --provider; '{FLAT_RATE}' for none)",
    )
    g.add_argument("--prices", metavar="FILE", help="price JSON replacing the shipped one")
    g.add_argument(
        "--cdn",
        metavar="NAME",
        help=f"CDN in front of the bucket (default: the table's for --provider; '{NO_CDN}')",
    )
    g.add_argument(
        "--cdn-edges",
        type=int,
        default=DEFAULT_EDGES,
        metavar="N",
        help=f"edge caches that each fetch a version once (default {DEFAULT_EDGES})",
    )
    g.add_argument(
        "--no-free-tier",
        dest="free_tier",
        action="store_false",
        help="ignore account-wide free egress (the account uses it elsewhere)",
    )
    g.add_argument(
        "--trainer-gpus",
        type=gpu_counts,
        default=(("A100-80GB", 4),),
        metavar="GPU:N[,...]",
        help="learner GPUs (default A100-80GB:4)",
    )
    g.add_argument("--worker-gpu", default="RTX-5090", metavar="GPU", help="default RTX-5090")
    g.add_argument("--relay-usd-per-gb", type=float, default=0.0, metavar="USD", help="default 0")
    g.add_argument(
        "--keyframe-every", type=int, default=10, metavar="N", help="deltas per keyframe"
    )
    g.add_argument("--retained-versions", type=int, default=2, metavar="N", help="kept (default 2)")


def inputs_from_args(args: argparse.Namespace) -> PlanInputs:
    """Flags over defaults, validated."""
    if args.from_verl_config:
        raise UsageError(
            "--from-verl-config moved to the verl integration: "
            f"python -m wanrl_s3_verl.estimate {args.from_verl_config} [the other flags]"
        )
    for flag, value in (
        ("--params", args.params),
        ("--t-train-s", args.t_train_s),
        ("--batch", args.batch),
    ):
        if value is None:
            raise UsageError(f"{flag} is required")
    budget = cap.staleness_budget(staleness=args.staleness, kappa=args.kappa, force=args.force)
    replicas = args.replica_regions or ()
    passed = {key: getattr(args, key) for key in _PASSTHROUGH}
    return PlanInputs(
        params=args.params,
        t_train_s=args.t_train_s,
        batch=args.batch,
        steps=100 if args.steps is None else args.steps,
        staleness=budget.staleness,
        regions=args.regions or 1 + len(replicas),
        replica_regions=replicas,
        **{**passed, **fleet_overrides(args)},  # --fleet replaces workers and downlink
    )


_PASSTHROUGH = (
    "bytes_per_param", "density", "force", "worker_rollouts_per_s", "gamma", "workers",
    "downlink_mbps", "uplink_mbps", "upload_mbps", "chunk_mb", "provider", "trainer_provider",
    "replicate", "replication_lag_s", "t_bcast_s", "trainer_gpus", "worker_gpu",
    "relay_usd_per_gb", "keyframe_every", "retained_versions", "cdn", "cdn_edges", "free_tier",
    "full_ratio", "trainer_ranks", "trainer_uplink_gbps",
)  # fmt: skip


def run(args: argparse.Namespace, today: date | None = None) -> int:
    """Print the plan; ``today`` (default: the clock) dates the price-staleness check."""
    inputs = inputs_from_args(args)
    prices = load_prices(args.prices)
    prices.provider(inputs.provider)  # fail on a bad name before any arithmetic
    plan = estimate(inputs, prices)
    stale = stale_warning(prices, plan.price_entries, today or date.today())
    for warning in (*plan.warnings, *filter(None, [stale])):
        tell(f"wanrl-s3: warning: {warning}")
    if args.json:  # the table first: a plot that cannot be written must not lose it
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print(render_text(plan, prices))
    if args.plot:
        from .estimate_plot import plot_plan

        written = plot_plan(plan, prices, args.plot)
        print(f"plot written to {written}", file=sys.stderr if args.json else sys.stdout)
    return 0
