"""Which read spreading keeps a delta burst under a prefix's limit: decided by simulation.

    .venv/bin/python benchmarks/fleet_sim_spread.py [--workers 10000] [--region-count 3] [--json]

A warm fleet (every worker holds the keyframe) takes ten deltas through each region's
bucket, rate-limited at the provider's documented limit, under each candidate:
a start jittered uniformly over [0, J] s after the poll that sees a version, payload
keys spread over K prefixes, both, and larger ranged GETs. A candidate meets the goal
when no prefix is offered more than its limit in any second of the delta bursts and
T_bcast at 90 % (mean over the deltas) is at most 10 % above the same fleet's on a
store without a limit. Extra arguments go to benchmarks/fleet_sim.py (the fleet, the
policy, the poll interval).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from fleet_sim import parse_args, simulate

#: (label, extra flags): the candidates, today's layout first.
CANDIDATES = [
    ("no limit (reference)", ["--no-limit"]),
    ("today: one prefix, no jitter", []),
    ("jitter 5 s", ["--start-jitter-s", "5"]),
    ("jitter 10 s", ["--start-jitter-s", "10"]),
    ("jitter 20 s", ["--start-jitter-s", "20"]),
    ("jitter 40 s", ["--start-jitter-s", "40"]),
    ("2 payload prefixes", ["--payload-prefixes", "2"]),
    ("4 payload prefixes", ["--payload-prefixes", "4"]),
    ("8 payload prefixes", ["--payload-prefixes", "8"]),
    ("2 prefixes + jitter 5 s", ["--payload-prefixes", "2", "--start-jitter-s", "5"]),
    ("64 MiB GETs", ["--request-mib", "64"]),
    ("64 MiB GETs + jitter 5 s", ["--request-mib", "64", "--start-jitter-s", "5"]),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", nargs="*", help="labels to run (default: all)")
    own, rest = ap.parse_known_args()
    base = ["--route", "bucket", "--start-held", *rest]
    rows, reference, headline = [], None, ""
    for label, flags in CANDIDATES:
        if own.only and label not in own.only and flags != ["--no-limit"]:
            continue
        args = parse_args([*base, *flags])
        start = time.perf_counter()
        report = simulate(args)
        wall = time.perf_counter() - start
        route = report["routes"]["bucket"]
        t90 = route["t_bcast_s"]["delta"]["p90"]
        reference = reference or t90
        headline = headline or report["headline"].split("; limit")[0]
        q = route["requests"]
        limit = report["inputs"]["read_limit_per_s"]
        row = {
            "candidate": label,
            "t90_s": t90,
            "t90_vs_reference": t90 / reference,
            "peak_per_s": q["peak_deltas_per_s"],
            "limit_per_s": limit,
            "slowdowns": q["slowdowns"],
            "failed_fetches": q["failed_fetches"],
            "meets": limit is not None
            and q["peak_deltas_per_s"] <= limit
            and t90 <= 1.1 * reference,
            "wall_s": wall,
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if own.json:
        print(json.dumps({"headline": headline, "rows": rows}, indent=1))
        return 0
    print(f"{headline}; a warm fleet, route bucket")
    print(f"{'candidate':<28} {'T90 s':>7} {'x ref':>6} {'peak/s':>8} {'SlowDowns':>10} meets")
    for r in rows:
        print(
            f"{r['candidate']:<28} {r['t90_s']:>7.1f} {r['t90_vs_reference']:>6.2f} "
            f"{r['peak_per_s']:>8,.0f} {r['slowdowns']:>10,} {'yes' if r['meets'] else 'no'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
