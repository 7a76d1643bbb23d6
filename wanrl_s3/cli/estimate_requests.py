"""``wanrl-s3 estimate``: the read requests a plan puts on its buckets, and LATEST's monthly bill.

Kept apart from estimate.py: it adds ``--read-limit-per-s`` and, after the table,
each bucket row's peak reads a second on its busiest bucket beside the provider's
documented limit (the price file's ``request_limits``), a warning with the remedy
for a row over it, and what polling LATEST costs a month (cost/requests.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..cost.egress import SECONDS_PER_MONTH
from ..cost.inputs import CDN_ROWS, LABELS
from ..cost.plan import Plan
from ..cost.prices import PriceBook
from ..cost.requests import RequestLoad, load_warning, object_warning, request_loads
from ..errors import UsageError
from .common import positive_int


def add_request_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("request rates")
    g.add_argument(
        "--read-limit-per-s",
        type=float,
        metavar="N",
        help="read requests a second one prefix serves before 503s (default: the provider's "
        "documented limit, from the price file; set it for a pre-partitioned prefix)",
    )
    g.add_argument(
        "--payload-prefixes",
        type=positive_int,
        default=1,
        metavar="K",
        help="the publisher's --payload-prefixes: each version's payload objects dealt over "
        "K prefixes, so the busiest prefix sees a share of the reads (and each worker lists "
        "each prefix it reads); a row over its limit names the K that fits",
    )


def _loads(plan: Plan, prices: PriceBook, limit: float | None) -> tuple[RequestLoad, ...]:
    if limit is not None and not limit > 0:
        raise UsageError(f"--read-limit-per-s must be a number > 0, got {limit:g}")
    rows = [(r.name, r.fleet_workers) for r in plan.by_topology]
    return request_loads(plan.inputs, rows, prices, limit)


def _per_s(value: float) -> str:
    """A rate to a person: whole numbers from 10 up, two significant digits below."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def _cdn_peak(loads: tuple[RequestLoad, ...]) -> float | None:
    return next((x.peak_per_s for x in loads if x.topology in CDN_ROWS), None)


def _polls(plan: Plan, prices: PriceBook) -> dict[str, float]:
    workers, p = plan.row(plan.recommended).fleet_workers, plan.inputs.poll_interval_s
    per_month = workers * SECONDS_PER_MONTH / p
    usd = per_month * prices.provider(plan.inputs.provider).get_usd_per_1000 / 1000
    return {"workers": workers, "per_s": workers / p, "per_month": per_month, "usd_per_month": usd}


def request_report(
    plan: Plan, prices: PriceBook, limit: float | None
) -> tuple[list[str], list[str], dict[str, Any]]:
    """(lines for the text report, warnings, the ``requests`` object of ``--json``)."""
    loads = _loads(plan, prices, limit)
    provider = prices.provider(plan.inputs.provider)
    documented = provider.request_limits
    cdn_peak = _cdn_peak(loads)
    warnings = [load_warning(x, provider.display, cdn_peak) for x in loads if x.over]
    warnings += [object_warning(x, provider.display) for x in loads if x.object_over]
    polls = _polls(plan, prices)
    if limit is not None:
        head = f"--read-limit-per-s {limit:,.0f} per prefix"
    elif documented is not None:
        head = (
            f"{provider.display} documents {documented.read_per_s:,.0f} reads/s per "
            f"{documented.scope} (read {documented.provenance.read_on.isoformat()})"
        )
    else:
        head = f"{provider.display} documents no request limit (--read-limit-per-s to check one)"
    k = plan.inputs.payload_prefixes
    spread = f", the payload over {k} prefixes" if k > 1 else ""
    lines = [f"reads a second on the busiest bucket at a publication's peak{spread}; {head}:"]
    for x in loads:
        mark = "  OVER" if x.over else ""
        r = x.rates
        parts = f"LATEST polls {_per_s(r.polls_per_s)}/s, fetches "
        parts += f"{_per_s(r.burst_per_s + r.stream_per_s)}/s"
        if k > 1:
            parts = f"run's prefix {_per_s(r.run_prefix_per_s)}/s, busiest payload prefix "
            parts += f"{_per_s(r.payload_prefix_per_s)}/s"
        lines.append(
            f"  {LABELS[x.topology]:<20} {_per_s(x.peak_per_s):>9}/s  ({parts}; "
            f"{x.workers_per_bucket:,} workers){mark}"
        )
    lines.append(
        f"LATEST polls: {polls['workers']:,} workers every {plan.inputs.poll_interval_s:g} s = "
        f"{_per_s(polls['per_s'])}/s, {polls['per_month']:,.0f} a month, "
        f"${polls['usd_per_month']:,.2f} a month (conditional GETs, billed as GETs)"
    )
    doc = {
        "limit_per_s": loads[0].limit_per_s if loads else None,
        "scope": loads[0].scope if loads else None,
        "payload_prefixes": k,
        "by_topology": {
            x.topology: {
                "peak_per_s": x.peak_per_s,
                "run_prefix_per_s": x.rates.run_prefix_per_s,
                "payload_prefix_per_s": x.rates.payload_prefix_per_s,
                "polls_per_s": x.rates.polls_per_s,
                "fetch_burst_per_s": x.rates.burst_per_s,
                "fetch_stream_per_s": x.rates.stream_per_s,
                "workers_per_bucket": x.workers_per_bucket,
                "over": x.over,
                "poll_interval_fit_s": x.poll_interval_fit_s,
                "payload_prefixes_fit": x.payload_prefixes_fit,
                "object_peak_per_s": x.object_peak_per_s,
                "object_limit_per_s": x.object_limit_per_s,
            }
            for x in loads
        },
        "polls": polls,
    }
    return lines, warnings, doc
