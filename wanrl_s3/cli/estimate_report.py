"""Human-readable rendering of a :class:`~wanrl_s3.cost.plan.Plan`.

Kept apart from the CLI so the docs and the tests can render exactly what the
command prints without going through argparse.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cost.cdn import EDGE_ROUND_TRIPS, FILL_ROUND_TRIPS
from ..cost.inputs import UNSHIPPED
from ..cost.plan import Plan, TopologyEstimate
from ..cost.prices import PriceBook
from ..cost.timing import publish_s
from ..cost.topology import star_unlimited_s
from ..units import count

_COLUMNS = ("topology", "T_bcast", "feasible", "needed", "egress/pub", "egress/run", "cost/step")
_WIDTHS = (20, 8, 8, 7, 10, 11, 9)


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def is_short(row: TopologyEstimate) -> bool:
    """The broadcast fits, but a fleet fixed by --workers or --fleet is below what it needs."""
    return row.workers_needed is not None and row.fleet_workers < row.workers_needed


def _feasible(row: TopologyEstimate) -> str:
    return "no" if not row.feasible else "short" if is_short(row) else "yes"


def _cells(row: TopologyEstimate) -> tuple[str, ...]:
    return (
        row.label if row.shipped else f"{row.label} *",
        f"{row.t_bcast_s:.0f} s",
        _feasible(row),
        "-" if row.workers_needed is None else str(row.workers_needed),
        _usd(row.egress_usd_per_publication),
        _usd(row.egress_usd_per_run),
        _usd(row.total_usd_per_step),
    )


def _line(cells: tuple[str, ...]) -> str:
    first = cells[0].ljust(_WIDTHS[0])
    rest = (c.rjust(w) for c, w in zip(cells[1:], _WIDTHS[1:], strict=True))
    return "  ".join((first, *rest)).rstrip()


def render_table(plan: Plan) -> str:
    """One row per topology; "needed" is the fleet each one needs, "short" a fixed fleet
    below it (explained under the table); a row wanrl-s3 does not ship is starred, and a
    last line says what the star means."""
    lines = [_line(_COLUMNS), *(_line(_cells(r)) for r in plan.by_topology)]
    short = [r for r in plan.by_topology if is_short(r)]
    if short:
        lines.append(
            f"short: the broadcast fits in kappa*T_train, but a fleet of "
            f"{count(short[0].fleet_workers, 'worker')} is smaller than needed: the learner "
            "waits for trajectories (see the warnings)"
        )
    unshipped = [r.label for r in plan.by_topology if not r.shipped]
    if unshipped:
        ranked = (
            "ranked with the others (--include-unshipped)"
            if plan.inputs.include_unshipped
            else "for comparison, never recommended (--include-unshipped ranks them)"
        )
        lines.append(f"* {', '.join(unshipped)}: {UNSHIPPED}; {ranked}")
    return "\n".join(lines)


def _gb(gb: float) -> str:
    """Decimal gigabytes to a person: megabytes below 1 GB (never '0.0 GB')."""
    return f"{gb:.1f} GB" if gb >= 1 else f"{gb * 1000:.3g} MB"


def _header(plan: Plan, prices: PriceBook) -> list[str]:
    i = plan.inputs
    provider = prices.provider(i.provider)
    source = "measured" if plan.t_bcast_source == "measured" else f"model: {plan.recommended}"
    region_word = "region" if i.regions == 1 else "regions"
    return [
        f"snapshot {_gb(i.snapshot_gb)} ({i.params:.3g} params x {i.bytes_per_param:g} B); "
        f"delta {i.delta_gb:.2f} GB at density {i.density:.0%}",
        f"full versions at {i.full_ratio:g}x raw (--full-ratio): {_gb(i.full_gb)} each "
        "(fleet start, joins, keyframes, star and chain pushes); deltas ship as coded",
        f"staleness S={i.staleness}, kappa={i.kappa}: window kappa*T_train = {i.window_s:.0f} s; "
        f"batch {i.batch} per step",
        f"floor (star-unlimited, {i.downlink_mbps:g} Mbps downlink): "
        f"{star_unlimited_s(i.full_gb, i.downlink_mbps):.0f} s full, "
        f"{star_unlimited_s(i.delta_gb, i.downlink_mbps):.0f} s delta",
        *_fleet_line(plan),
        _publish_line(plan),
        f"T_bcast {plan.t_bcast_s:.0f} s ({source}): slack {plan.slack_s:.0f} s, "
        f"required pool {plan.required_pool_rollouts_per_s:.3f} rollouts/s{_drops(plan)}, "
        f"{count(plan.workers_needed, 'worker')} needed at {i.worker_rollouts_per_s:g} "
        f"rollouts/s each (gamma {i.gamma:g}){_fleet_has(plan)}",
        f"prices: {provider.display} (read {plan.prices_as_of}), {i.regions} {region_word}; "
        f"run {i.steps} steps = {i.publications} publications",
        *_cdn_line(plan),
    ]


def _drops(plan: Plan) -> str:
    """What the staleness filter throws away, when the user said it does."""
    d = plan.inputs.dropped_fraction
    if not d:
        return ""
    admitted = plan.required_pool_rollouts_per_s * (1.0 - d)
    return f" ({d:.0%} dropped as too old: {admitted:.3f} admitted)"


def _fleet_line(plan: Plan) -> list[str]:
    """Say that the plan is for a given fleet, not the uniform --downlink-mbps one."""
    i = plan.inputs
    if i.fleet is None:
        return []
    down = [w.downlink_mbps for w in i.fleet.workers]
    rtt = [w.rtt_ms for w in i.fleet.workers]
    plural = "s" if len(i.fleet) > 1 else ""
    median = f" (median {i.fleet.median_downlink_mbps:g})" if min(down) != max(down) else ""
    links = f"downlink{plural} {_span(down)} Mbps{median}, round trip{plural} {_span(rtt)} ms"
    return [
        f"fleet: {count(len(i.fleet), 'worker')}, each on its own link (--fleet / "
        f"--from-status): {links}; T_bcast at {i.bcast_fraction:.0%} of them, "
        f"poll {i.fetch.poll_interval_s:g} s"
        + (f", batch boundary {i.batch_wait_s:g} s" if i.batch_wait_s else "")
    ]


def _span(values: list[float]) -> str:
    """'10-1000', or one value where they are all the same."""
    low, high = f"{min(values):g}", f"{max(values):g}"
    return low if low == high else f"{low}-{high}"


def _fleet_has(plan: Plan) -> str:
    """What a fleet fixed by --workers or --fleet lacks, said where the headline sizes it."""
    have = plan.inputs.workers
    if have is None or have >= plan.workers_needed:
        return ""
    return f"; the fleet has {have}"


def _seconds(value_s: float) -> str:
    """Whole seconds from 10 s up, two significant digits below (a 0.2 s commit stays visible)."""
    return f"{value_s:.0f} s" if value_s >= 10 else f"{value_s:.2g} s"


def _publish_line(plan: Plan) -> str:
    """The bucket rows' publish term: how long until a version is visible, and from what."""
    i, uplink = plan.inputs, plan.inputs.trainer_uplink
    copies = 1 if i.replicate else i.regions
    buckets = "" if copies == 1 else f" to each of {copies} buckets"
    times = (
        f"publish (bucket rows, until visible): {_seconds(publish_s(i, i.full_gb))} full, "
        f"{_seconds(publish_s(i, i.delta_row_gb))} delta"
    )
    if uplink is None:
        rate = i.upload_mbps or i.uplink_mbps
        return (
            f"{times}: one upload at {rate:g} Mbps{buckets}; the trainer's ranks not modelled "
            "(--trainer-uplink-gbps)"
        )
    ranks = (
        f"one trainer rank at {uplink.per_rank_gbps:g} Gbit/s"
        if uplink.ranks == 1
        else f"{uplink.ranks} trainer ranks x {uplink.per_rank_gbps:g} Gbit/s = "
        f"{uplink.aggregate_mbps / 1000:g} Gbit/s"
    )
    return (
        f"{times}: {ranks}{buckets} if the store's endpoint keeps up (it may saturate "
        f"first), then a {_seconds(uplink.commit_s)} commit"
    )


def _cdn_line(plan: Plan) -> list[str]:
    """How the CDN rows were modelled, or nothing when no CDN fronts the provider."""
    if plan.cdn_display is None:
        return []
    i = plan.inputs
    fills = (
        f"; a version's first reader at each edge waits {FILL_ROUND_TRIPS} x "
        f"{i.cdn_fill_rtt_ms:g} ms for the edge's fetches (--cdn-fill-rtt-ms)"
        if i.cdn_fill_rtt_ms
        else ""
    )
    answers = (
        f"; the edge's cached answers skip the store's {i.store_answer_ms:g} ms on "
        f"{EDGE_ROUND_TRIPS} reads (--store-answer-ms)"
        if i.store_answer_ms
        else ""
    )
    return [
        f"cdn: {plan.cdn_display} in front of the bucket, {i.cdn_edges} edges: each version "
        f"leaves the bucket once per edge reached (min({i.cdn_edges}, workers)), the edges "
        f"serve every worker{fills}{answers}"
    ]


def render_text(plan: Plan, prices: PriceBook, notes: Sequence[str] = ()) -> str:
    """The whole human report: assumptions, the table, ``notes`` (the request rates), the
    recommendation."""
    return "\n".join(
        [
            *_header(plan, prices),
            "",
            render_table(plan),
            "",
            *([*notes, ""] if notes else []),
            f"recommendation: {plan.reason}",
        ]
    )
