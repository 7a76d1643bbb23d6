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
from .estimate_requests import add_request_flags, request_report
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
    add_request_flags(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument(
        "--plot", metavar="FILE.png", help="draw T_bcast and cost per run against the fleet size"
    )
    out.add_argument(
        "--include-unshipped",
        action="store_true",
        help="rank the routes wanrl-s3 models but does not ship (the star, the peer chain) "
        "with the others (default: they are priced for comparison, never recommended)",
    )
    parser.set_defaults(func=run)
    return parser


class _Moved(argparse.Action):
    """``--from-verl-config``: refused as soon as it is read, naming the command that took
    it over (before argparse would complain about the flags that command supplies)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        raise UsageError(
            "--from-verl-config moved to the verl integration: "
            f"python -m wanrl_s3_verl.estimate {values} [the other flags]"
        )


class _RegionCount(argparse.Action):
    """``--regions N``, the old spelling of ``--region-count``: works, with a stderr line.

    Everywhere else ``--regions`` names a regions FILE; a count under that name read as one.
    """

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        print(
            f"wanrl-s3: warning: estimate --regions {values} is now --region-count {values} "
            "(--regions names a regions file in the other commands)",
            file=sys.stderr,
        )
        namespace.region_count = values


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model and run")
    g.add_argument("--from-verl-config", metavar="FILE", action=_Moved, help=argparse.SUPPRESS)
    g.add_argument(
        "--params",
        type=parameter_count,
        required=True,
        metavar="N",
        help="parameters in the policy: 8.2e9, 8200000000 or 8.2B (K, M, B or G, T)",
    )
    g.add_argument(
        "--bytes-per-param", type=float, default=2.0, metavar="B", help="bytes per parameter"
    )
    g.add_argument(
        "--density",
        type=float,
        default=0.05,
        metavar="F",
        help="fraction of the values a delta changes, in (0, 1]",
    )
    g.add_argument(
        "--t-train-s", type=float, required=True, metavar="S", help="seconds per learner step"
    )
    g.add_argument(
        "--t-bcast-s",
        type=float,
        metavar="S",
        help="measured broadcast seconds (`wanrl-s3 status`) for the headline "
        "(default: modelled per topology)",
    )
    budget = g.add_mutually_exclusive_group()
    budget.add_argument(
        "--staleness",
        type=int,
        metavar="S",
        help="staleness budget S, >= 3 unless --force (default: 3)",
    )
    budget.add_argument(
        "--kappa",
        type=int,
        metavar="K",
        help="learner steps per publication, S - 1 (default: from --staleness)",
    )
    g.add_argument("--force", action="store_true", help="allow a staleness budget below 3")
    g.add_argument(
        "--batch", type=int, required=True, metavar="N", help="trajectories per learner step"
    )
    g.add_argument("--steps", type=int, default=100, metavar="N", help="learner steps in the run")
    g.add_argument(
        "--worker-rollouts-per-s",
        type=float,
        default=0.33,
        metavar="R",
        help="trajectories one worker generates per second",
    )
    g.add_argument(
        "--gamma", type=float, default=1.1, metavar="G", help="overprovisioning factor, >= 1"
    )
    g.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="fix the fleet at N workers (default: the planner sizes it)",
    )
    g.add_argument(
        "--dropped-fraction",
        type=float,
        default=0.0,
        metavar="D",
        help="share of the trajectories reaching the learner that it drops as too old, "
        "in [0, 1): the pool must generate 1/(1-D) more",
    )


def _add_network_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("network")
    g.add_argument(
        "--downlink-mbps",
        type=float,
        default=100.0,
        metavar="M",
        help="each worker's downlink, Mbit/s",
    )
    g.add_argument(
        "--uplink-mbps",
        type=float,
        default=300.0,
        metavar="M",
        help="B0: the trainer's uplink, Mbit/s",
    )
    g.add_argument(
        "--upload-mbps",
        type=float,
        metavar="M",
        help="the trainer's upload rate to the bucket, Mbit/s (default: --uplink-mbps)",
    )
    g.add_argument(
        "--chunk-mb",
        type=float,
        default=64.0,
        metavar="MB",
        help="payload object size, MB (sets the request count)",
    )
    g.add_argument(
        "--region-count",
        type=int,
        metavar="N",
        help="buckets, one per region (default: 1 + the --replica-regions named)",
    )
    g.add_argument("--regions", type=int, action=_RegionCount, help=argparse.SUPPRESS)
    g.add_argument(
        "--replica-regions",
        type=region_names,
        metavar="R[,R...]",
        help="name the extra regions (priced per region pair; sets --region-count)",
    )
    g.add_argument(
        "--replicate",
        action="store_true",
        help="upload once; the provider replicates to the other regions",
    )
    g.add_argument(
        "--replication-lag-s",
        type=float,
        default=0.0,
        metavar="S",
        help="with --replicate: the provider's replication delay, seconds",
    )


def _add_publication_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("publication")
    g.add_argument(
        "--full-ratio",
        type=float,
        default=TYPICAL_FULL_RATIO,
        metavar="R",
        help="stored/raw bytes of a full version, in (0, 1] (default: "
        f"{TYPICAL_FULL_RATIO}, the byte-plane codec on bf16 weights; 1 for incompressible "
        "tensors)",
    )
    g.add_argument(
        "--trainer-ranks",
        type=int,
        default=1,
        metavar="N",
        help="trainer ranks that each upload a balanced part of a version",
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
        "--provider",
        default="aws",
        metavar="NAME",
        help="who stores the bucket: a storage entry of the price table (aws, gcs, azure, "
        "r2, b2; `wanrl-s3 prices` lists them)",
    )
    g.add_argument(
        "--trainer-provider",
        metavar="NAME",
        help=f"who bills the trainer's egress (default: --provider; '{FLAT_RATE}' for none)",
    )
    g.add_argument(
        "--prices",
        metavar="FILE",
        help="a price JSON replacing the shipped one (default: the shipped table)",
    )
    g.add_argument(
        "--cdn",
        metavar="NAME",
        help=f"CDN in front of the bucket (default: the table's for --provider; '{NO_CDN}' "
        "for none)",
    )
    g.add_argument(
        "--cdn-edges",
        type=int,
        default=DEFAULT_EDGES,
        metavar="N",
        help="edge caches that each fetch a version once",
    )
    g.add_argument(
        "--cdn-fill-rtt-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="an edge's round trip to the bucket on a miss, ms; a version's first reader at "
        "each edge waits for two (the manifest, the payload's first slice); 0 leaves them out",
    )
    g.add_argument(
        "--store-answer-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="the store's own time to answer a request, ms, a part of each --fleet rtt_ms; "
        "the CDN rows' manifest and payload reads, answered from the edge's cache, skip it",
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
        help="the learner's GPUs, priced per hour",
    )
    g.add_argument(
        "--worker-gpu",
        default="RTX-5090",
        metavar="GPU",
        help="each rollout worker's GPU, priced per hour",
    )
    g.add_argument(
        "--relay-usd-per-gb",
        type=float,
        default=0.0,
        metavar="USD",
        help="egress from the workers' hosts when they relay (peer chain), USD per GB",
    )
    g.add_argument(
        "--keyframe-every",
        type=int,
        default=10,
        metavar="N",
        help="a full keyframe every N publications (as `publish --keyframe-every`)",
    )
    g.add_argument(
        "--retained-versions",
        type=int,
        default=2,
        metavar="N",
        help="versions kept in the bucket (storage cost)",
    )


def inputs_from_args(args: argparse.Namespace) -> PlanInputs:
    """Flags over defaults, validated."""
    budget = cap.staleness_budget(staleness=args.staleness, kappa=args.kappa, force=args.force)
    replicas = args.replica_regions or ()
    passed = {key: getattr(args, key) for key in _PASSTHROUGH}
    return PlanInputs(
        params=args.params,
        t_train_s=args.t_train_s,
        batch=args.batch,
        steps=args.steps,
        staleness=budget.staleness,
        regions=args.region_count or 1 + len(replicas),
        replica_regions=replicas,
        **{**passed, **fleet_overrides(args)},  # --fleet replaces workers and downlink
    )


_PASSTHROUGH = (
    "bytes_per_param", "density", "force", "worker_rollouts_per_s", "gamma", "workers",
    "downlink_mbps", "uplink_mbps", "upload_mbps", "chunk_mb", "provider", "trainer_provider",
    "replicate", "replication_lag_s", "t_bcast_s", "trainer_gpus", "worker_gpu",
    "relay_usd_per_gb", "keyframe_every", "retained_versions", "cdn", "cdn_edges", "free_tier",
    "cdn_fill_rtt_ms", "store_answer_ms", "payload_prefixes",
    "full_ratio", "trainer_ranks", "trainer_uplink_gbps", "dropped_fraction", "include_unshipped",
)  # fmt: skip


def run(args: argparse.Namespace, today: date | None = None) -> int:
    """Print the plan; ``today`` (default: the clock) dates the price-staleness check."""
    inputs = inputs_from_args(args)
    prices = load_prices(args.prices)
    prices.provider(inputs.provider)  # fail on a bad name before any arithmetic
    plan = estimate(inputs, prices)
    request_lines, request_warnings, requests = request_report(plan, prices, args.read_limit_per_s)
    stale = stale_warning(prices, plan.price_entries, today or date.today())
    for warning in (*plan.warnings, *request_warnings, *filter(None, [stale])):
        tell(f"wanrl-s3: warning: {warning}")
    if args.json:  # the table first: a plot that cannot be written must not lose it
        print(json.dumps({**plan.to_dict(), "requests": requests}, indent=2))
    else:
        print(render_text(plan, prices, request_lines))
    if args.plot:
        from .estimate_plot import plot_plan

        written = plot_plan(plan, prices, args.plot)
        print(f"plot written to {written}", file=sys.stderr if args.json else sys.stdout)
    return 0
