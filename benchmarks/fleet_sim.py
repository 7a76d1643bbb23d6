"""Dissemination at internet scale, simulated: T_bcast, requests per prefix and dollars per route.

    .venv/bin/python benchmarks/fleet_sim.py --workers 1000 --region-count 3 [--route all] [--json]
    .venv/bin/python benchmarks/fleet_sim.py --calibrate docs/results/wan-fleet-2026-12-04/*.json

A discrete-event simulation (SimPy) of one trainer publishing a keyframe and
``--deltas`` deltas to a fleet of ``--workers`` rollout workers spread over
``--region-count`` regional buckets, by route: ``bucket`` (the trainer writes every
region), ``relay`` (it writes the primary; a relay copies to each replica) and
``cdn`` (every region's bucket behind CDN edges); ``--route replicate`` (the
provider's bucket replication, ``--replication-lag-s``) on request. The model (benchmarks/
fleet_sim_model.py) follows the code: the poll loop and its jitter (``WatchConfig``),
the fetch's requests in sequence, ranged GETs with ``concurrency`` in flight, the
retry policy (``RetryPolicy``) against prefixes that answer 503 past
``--read-limit-per-s`` (default: the provider's documented limit, from the price
file), churn. Printed per route: T_bcast at 50/90/99 % (keyframe; deltas), peak and
mean requests per second per prefix, SlowDowns and retries, dollars per publication
and per month, beside the closed-form planner's (``wanrl_s3.cost``) for the same
inputs. docs/scale.md describes the model and what it leaves out.

``--calibrate FILE`` instead predicts every row of a benchmarks/wan_fleet.py JSON
(benchmarks/fleet_sim_calibrate.py). Bad input: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from fleet_sim_calibrate import load_run, predict
from fleet_sim_model import MAIN_ROUTES, ROUTES, FleetSim, SimConfig, Version
from fleet_sim_report import print_table, route_report

from wanrl_s3 import RetryPolicy, UsageError, WatchConfig
from wanrl_s3.cost import FetchModel, FleetLinks, WorkerLink, load_prices, parse_fleet

MAX_WORKERS = 100_000
#: How a refused request retries: the product's budget for throttled requests, or the
#: transient failure's (what the product did before throttling had a budget of its own).
THROTTLED_RETRY = {
    "product": RetryPolicy(),
    "transient": RetryPolicy(throttled_attempts=6, throttled_base_delay_s=0.2,
                             throttled_max_delay_s=10.0),
}  # fmt: skip


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (no usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"fleet_sim.py: error: {message}", file=sys.stderr)
        sys.exit(2)


def _number(low: float, *, above: bool = True, integer: bool = False):
    def parse(text: str) -> float:
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if math.isnan(value) or (value <= low if above else value < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {low:g}: {text}")
        return value

    return parse


POSITIVE, NON_NEGATIVE = _number(0), _number(0, above=False)
COUNT = _number(0, integer=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = Parser(description=__doc__.splitlines()[0])
    g = ap.add_argument_group("fleet")
    g.add_argument("--workers", type=COUNT, default=1000, help="rollout GPUs (default 1000)")
    g.add_argument("--gpus-per-host", type=COUNT, default=1, help="a host downloads once for all")
    g.add_argument("--region-count", type=COUNT, default=3)
    g.add_argument(
        "--fleet", type=Path, help="a fleet file (one row per host) instead of drawn links"
    )
    g.add_argument("--down-mbit", type=POSITIVE, nargs=2, default=(50.0, 1000.0))
    g.add_argument("--rtt-ms", type=NON_NEGATIVE, nargs=2, default=(10.0, 200.0))
    g.add_argument("--request-ms", type=NON_NEGATIVE, default=20.0, help="the store's answer time")
    g.add_argument("--install-mb-per-s", type=POSITIVE, default=500.0)
    g.add_argument("--poll-interval-s", type=POSITIVE, default=WatchConfig().poll_interval_s)
    g.add_argument("--crash-per-hour", type=NON_NEGATIVE, default=0.0)
    g.add_argument("--restart-s", type=POSITIVE, default=120.0)
    g.add_argument("--replace-share", type=NON_NEGATIVE, default=0.0, help="of restarts: new hosts")
    g = ap.add_argument_group("policy and publication")
    g.add_argument("--params", type=POSITIVE, default=8.2e9, help="default 8.2e9 (an 8B policy)")
    g.add_argument("--full-ratio", type=POSITIVE, default=0.671, help="keyframe stored / raw")
    g.add_argument("--density", type=POSITIVE, default=0.01, help="delta stored / raw (0.01)")
    g.add_argument("--deltas", type=_number(0, above=False, integer=True), default=10)
    g.add_argument("--cadence-s", type=POSITIVE, default=300.0, help="between publications")
    g.add_argument("--start-held", action="store_true", help="workers hold the keyframe at start")
    g.add_argument("--trainer-uplink-gbps", type=POSITIVE, default=10.0)
    g.add_argument("--trainer-rtt-ms", type=NON_NEGATIVE, default=50.0)
    g = ap.add_argument_group("stores and routes")
    g.add_argument("--route", choices=(*ROUTES, "all"), default="all")
    g.add_argument("--provider", default="aws")
    g.add_argument("--prices", type=Path, help="a price file replacing the shipped one")
    g.add_argument("--read-limit-per-s", type=POSITIVE, help="default: the provider's, or none")
    g.add_argument("--no-limit", action="store_true", help="prefixes serve any rate")
    g.add_argument("--payload-prefixes", type=COUNT, default=1, help="payload spread over K")
    g.add_argument(
        "--start-jitter-s", type=NON_NEGATIVE, default=0.0, help="U(0, J) before a fetch"
    )
    g.add_argument("--request-mib", type=POSITIVE, default=8.0, help="a ranged GET (default 8)")
    g.add_argument(
        "--throttled-retry",
        choices=("product", "transient"),
        default="product",
        help="a refused request retries as RetryPolicy retries a throttled one (product: 12 "
        "tries, 1 s doubling to 20 s) or as a transient failure (6 tries from 0.2 s)",
    )
    g.add_argument("--batch-requests", type=COUNT, default=16, help="parts simulated per event")
    g.add_argument("--window-s", type=POSITIVE, default=1.0, help="rate-limit window")
    g.add_argument("--relay-poll-s", type=POSITIVE, default=5.0)
    g.add_argument("--relay-mbps", type=POSITIVE, default=5000.0)
    g.add_argument("--replication-lag-s", type=NON_NEGATIVE, default=10.0, help="replicate")
    g.add_argument("--cdn-edges", type=COUNT, default=8, help="per region")
    g.add_argument("--edge-fill-mbps", type=POSITIVE, default=5000.0)
    g.add_argument("--seed", type=_number(0, above=False, integer=True), default=0)
    g = ap.add_argument_group("output")
    g.add_argument("--json", action="store_true")
    g.add_argument("--timeline", type=Path, help="write each prefix's offered load per window")
    g = ap.add_argument_group("calibration")
    g.add_argument("--calibrate", type=Path, nargs="+", metavar="FILE", help="wan_fleet.py JSON")
    g.add_argument("--replications", type=COUNT, default=50)
    g.add_argument("--mib", type=POSITIVE, help="the run's snapshot, if its JSON lacks it")
    g.add_argument("--chains", type=COUNT, help="the run's chain count, if its JSON lacks it")
    args = ap.parse_args(argv)
    if args.workers > MAX_WORKERS:
        ap.error(f"--workers must be at most {MAX_WORKERS:,}, got {args.workers:,}")
    if args.down_mbit[0] > args.down_mbit[1] or args.rtt_ms[0] > args.rtt_ms[1]:
        ap.error("--down-mbit and --rtt-ms take LOW HIGH, low first")
    if args.density > 1 or args.full_ratio > 1:
        ap.error("--density and --full-ratio are shares of the raw snapshot: at most 1")
    return args


def draw_links(args: argparse.Namespace) -> FleetLinks:
    """Hosts with log-uniform downlinks, uplinks 0.5-1x, uniform round trips (plus the
    store's answer time), dealt over the regions in turn; or the fleet file's."""
    if args.fleet is not None:
        try:
            text = args.fleet.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read --fleet {args.fleet}: {exc.strerror or exc}") from exc
        return parse_fleet(text, args.fleet.name)
    rng = random.Random(args.seed)
    (lo, hi), (rlo, rhi) = args.down_mbit, args.rtt_ms
    hosts = math.ceil(args.workers / args.gpus_per_host)
    rows = []
    for i in range(hosts):
        down = lo * (hi / lo) ** rng.random()
        rtt = rng.uniform(rlo, rhi) + args.request_ms
        region = f"region-{i % args.region_count}"
        rows.append(WorkerLink(f"host-{i}", down, down * rng.uniform(0.5, 1.0), rtt, region))
    return FleetLinks(tuple(rows))


def sim_config(args: argparse.Namespace, route: str) -> SimConfig:
    raw = int(args.params * 2)
    deltas = [Version(2 + i, "delta", round(raw * args.density)) for i in range(args.deltas)]
    versions = (Version(1, "full", round(raw * args.full_ratio)), *deltas)
    limit = math.inf if args.no_limit else args.read_limit_per_s
    if limit is None:
        documented = load_prices(args.prices).provider(args.provider).request_limits
        limit = documented.read_per_s if documented is not None else math.inf
    return SimConfig(
        versions=versions, snapshot_bytes=raw, route=route, cadence_s=args.cadence_s,
        watch=WatchConfig(poll_interval_s=args.poll_interval_s),
        fetch=FetchModel(args.poll_interval_s, install_mb_per_s=args.install_mb_per_s),
        request_bytes=round(args.request_mib * 2**20), batch_requests=args.batch_requests,
        read_limit_per_s=limit, window_s=args.window_s, payload_prefixes=args.payload_prefixes,
        start_jitter_s=args.start_jitter_s, trainer_uplink_mbps=args.trainer_uplink_gbps * 1000,
        trainer_rtt_s=args.trainer_rtt_ms / 1000, relay_poll_s=args.relay_poll_s,
        relay_mbps=args.relay_mbps, replication_lag_s=args.replication_lag_s,
        cdn_edges=args.cdn_edges, edge_fill_mbps=args.edge_fill_mbps,
        crash_per_hour=args.crash_per_hour, restart_s=args.restart_s,
        replace_share=args.replace_share, start_held=args.start_held, seed=args.seed,
        retry=THROTTLED_RETRY[args.throttled_retry],
    )  # fmt: skip


def timeline(outcome: Any) -> dict[str, Any]:
    """Each prefix's offered requests per second, window by window, and every commit."""
    limit = outcome.config.read_limit_per_s
    return {
        "window_s": outcome.config.window_s,
        "limit_per_s": None if math.isinf(limit) else limit,
        "stamps_s": {str(v): t for v, t in outcome.stamps_s.items()},
        "offered_per_s": {
            p.name: p.offered_per_s(outcome.end_s)
            for region in outcome.regions
            for p in dict.fromkeys((region.base, *region.payload))
        },
    }


def simulate(args: argparse.Namespace) -> dict[str, Any]:
    links = draw_links(args)
    prices = load_prices(args.prices)
    prices.provider(args.provider)
    routes = MAIN_ROUTES if args.route == "all" else (args.route,)
    report: dict[str, Any] = {"routes": {}, "timelines": {}}
    for route in routes:
        config = sim_config(args, route)
        start = time.perf_counter()
        outcome = FleetSim(links, config).run()
        wall = time.perf_counter() - start
        report["routes"][route] = route_report(outcome, prices, args.provider, wall)
        if args.timeline is not None:
            report["timelines"][route] = timeline(outcome)
    limit = sim_config(args, routes[0]).read_limit_per_s
    report["inputs"] = {
        "hosts": len(links), "workers": args.workers, "gpus_per_host": args.gpus_per_host,
        "regions": len({w.region for w in links.workers}), "provider": args.provider,
        "read_limit_per_s": None if math.isinf(limit) else limit,
        **{k: getattr(args, k) for k in (
            "params", "full_ratio", "density", "deltas", "cadence_s", "poll_interval_s",
            "payload_prefixes", "start_jitter_s", "request_mib", "crash_per_hour",
            "replace_share", "seed", "start_held", "down_mbit", "rtt_ms", "request_ms",
            "throttled_retry")},
    }  # fmt: skip
    i = report["inputs"]
    report["headline"] = (
        f"{i['workers']:,} workers on {i['hosts']:,} hosts over {i['regions']} regions; "
        f"{args.params / 1e9:g}B policy: keyframe {args.params * 2 * args.full_ratio / 1e9:.1f} "
        f"GB, {args.deltas} deltas of {args.params * 2 * args.density / 1e9:.2f} GB every "
        f"{args.cadence_s:g} s; poll {args.poll_interval_s:g} s; limit "
        f"{'none' if i['read_limit_per_s'] is None else f'{limit:,.0f}/s'} per prefix; "
        f"{args.payload_prefixes} payload prefix(es), start jitter {args.start_jitter_s:g} s, "
        f"a refused request retried as a {args.throttled_retry} one"
    )
    return report


def calibrate(args: argparse.Namespace) -> list[dict[str, Any]]:
    snapshot = round(args.mib * 2**20) if args.mib else None
    lines = []
    for path in args.calibrate:
        run = load_run(path, snapshot, args.chains)
        lines += predict(run, args.replications)
    return lines


def print_calibration(lines: list[dict[str, Any]]) -> None:
    print(
        f"{'run':<20} {'uplinks':<10} {'topology':<15} {'kind':<6} {'measured s':>10} "
        f"{'simulated s':>11} {'10-90 %':>13} {'sim/meas':>8} {'planner s':>9}"
    )
    for x in lines:
        band = f"{x['band_s'][0]:.2f}-{x['band_s'][1]:.2f}"
        print(
            f"{x['run']:<20} {x['uplink_queue']:<10} {x['topology']:<15} {x['kind']:<6} "
            f"{x['measured_s']:>10.3f} {x['simulated_s']:>11.3f} {band:>13} "
            f"{x['ratio']:>8.3f} {x['planner_s']:>9.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.calibrate:
            lines = calibrate(args)
            if args.json:
                print(json.dumps(lines, indent=1))
            else:
                print_calibration(lines)
            return 0
        report = simulate(args)
    except UsageError as exc:
        print(f"fleet_sim.py: error: {exc}", file=sys.stderr)
        return 2
    if args.timeline is not None:
        args.timeline.write_text(json.dumps(_finite(report.pop("timelines"))))
    else:
        report.pop("timelines")
    if args.json:
        print(json.dumps(_finite(report), indent=1))
    else:
        print_table(report)
    return 0


def _finite(value: Any) -> Any:
    """``value`` with every infinite float (a worker that never installed) as null."""
    if isinstance(value, float) and math.isinf(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
