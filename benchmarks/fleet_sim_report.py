"""What benchmarks/fleet_sim.py prints: T_bcast, requests per prefix, dollars, and the planner's.

Per route, from one simulated run (:class:`fleet_sim_model.Outcome`):

* **T_bcast** at 50/90/99 % of the workers alive at each commit, from the start of the
  trainer's upload (the planner's T_bcast: the publish term included): the keyframe,
  and the mean over the deltas (all of them, and the steady ones: deltas committed
  after 99 % of the fleet held the keyframe). With churn a steady delta still has
  workers that do not read it from the version before (about 1 % of 1,000 at the first
  steady delta, 0.5 % later: hosts that crashed or were replaced and are back on the
  keyframe, slow first downloads on the chain after it, hosts that go down before they
  install); the 99th percentile lands on one of them once they are as many as the
  workers above it, so the steady deltas' quantiles are also given over the readers
  alone (``Outcome.readers``: the workers the planner's closed form describes), with
  the others' count.
* **requests per prefix**: each prefix's offered rate (background polls, retries and
  refused requests included) per window, its peak and its mean until the last install,
  the peak it admitted, and the run's SlowDowns, retries and fetches started over.
* **dollars** per delta publication, per month at the cadence (polls added), and for
  the fleet's start (the keyframe to every worker), on the price file's ladders: egress
  and inter-region bytes, GETs, listings (billed with PUTs), the trainer's PUTs, a
  CDN's fill, egress and requests. Refused requests (503) are not billed (AWS).
* **the planner** (``wanrl_s3.cost``) for the same inputs: its T_bcast at the same
  fractions, its egress per publication and per month, and its peak reads a second.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from fleet_sim_model import COMMIT_REQUESTS, INF, OBJECT_BYTES, Outcome, SimConfig

from wanrl_s3 import InfeasiblePlanError, PlanInputs
from wanrl_s3.cost import (
    FleetLinks,
    PriceBook,
    TrainerUplink,
    at_fraction_s,
    evaluate,
    month_usd,
    object_storage_fleet_s,
    payload_prefixes_fit,
    read_rates,
)

FRACTIONS = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
SECONDS_PER_MONTH = 730 * 3600.0  # a cloud billing month
KAPPA = 2  # the planner's steps per publication (staleness 3): T_train = cadence / 2


def quantiles(times: list[float]) -> dict[str, float]:
    return {k: at_fraction_s(times, f) for k, f in FRACTIONS.items()}


def t_bcast(out: Outcome) -> dict[str, Any]:
    """Quantiles per kind (see the module doc); ``never``: workers alive at a commit that had
    not installed it when the run ended."""
    cfg = out.config
    per = {v.number: quantiles(out.t_bcast_s(v.number, "start")) for v in cfg.versions}
    deltas = [v.number for v in cfg.versions if v.kind == "delta"]
    full = cfg.versions[0].number
    steady = steady_deltas(out, per)
    readers = {v: _readers_s(out, v) for v in steady}
    result: dict[str, Any] = {
        "per_version": {str(v): per[v] for v in per},
        "never": sum(t == INF for v in per for t in out.t_bcast_s(v)),
    }
    if not cfg.start_held:
        result["full"] = per[full]
    for name, chosen in (("delta", deltas), ("delta_steady", steady)):
        if chosen:
            result[name] = {k: statistics.mean(per[v][k] for v in chosen) for k in FRACTIONS}
            result[name]["versions"] = len(chosen)
    read = [v for v in steady if readers[v]]
    if read:
        q = {v: quantiles(readers[v]) for v in read}
        result["delta_steady_readers"] = {
            **{k: statistics.mean(q[v][k] for v in read) for k in FRACTIONS},
            "others": statistics.mean(len(out.t_bcast_s(v)) - len(readers[v]) for v in read),
        }
    return result


def _readers_s(out: Outcome, version: int) -> list[float]:
    """T_bcast of ``version`` (from the upload's start) over its readers (``Outcome.readers``)."""
    times = out.t_bcast_s(version, "start")
    return [t for t, read in zip(times, out.readers(version), strict=True) if read]


def requests(out: Outcome) -> dict[str, Any]:
    """Per prefix: peak and mean offered, peak admitted; the run's refusals and retries."""
    finite = [t for ts in out.installed_s.values() for t in ts if t < INF]
    until = max(finite) if finite else out.end_s
    deltas = [out.stamps_s[v.number] for v in out.config.versions if v.kind == "delta"]
    split = int(min(deltas, default=until) / out.config.window_s)  # first delta's window
    prefixes = {}
    for region in out.regions:
        for p in dict.fromkeys((region.base, *region.payload)):
            offered = p.offered_per_s(until)
            prefixes[p.name] = {
                "peak_per_s": max(offered),
                "peak_keyframe_per_s": max(offered[:split], default=0.0),
                "peak_deltas_per_s": max(offered[split:], default=0.0),
                "mean_per_s": statistics.fmean(offered),
                "peak_admitted_per_s": max(p.admitted_per_s(until)),
            }
    background = sum(r.base.background_slowdowns(until) for r in out.regions)
    peak = lambda key: max(x[key] for x in prefixes.values())  # noqa: E731
    return {
        "prefixes": prefixes,
        "peak_per_s": peak("peak_per_s"),
        "peak_keyframe_per_s": peak("peak_keyframe_per_s"),
        "peak_deltas_per_s": peak("peak_deltas_per_s"),
        "slowdowns": out.total("slowdowns") + round(background),
        "retries": out.total("retries"),
        "failed_fetches": out.total("failed_fetches"),
        "poll_failures": out.total("poll_failures"),
        "wasted_gb": out.total("wasted_bytes") / 1e9,
    }


@dataclass(frozen=True)
class Bill:
    egress_usd: float
    requests_usd: float

    def to_dict(self) -> dict[str, float]:
        return {"egress_usd": self.egress_usd, "requests_usd": self.requests_usd}


def _ladder_usd(gb: float, per_month: float, tiers: Any, free_gb: float) -> float:
    """``gb`` priced at the month's average rate on ``tiers`` when the month moves
    ``gb * per_month`` (tiers and allowances are monthly)."""
    if gb <= 0:
        return 0.0
    month_gb = gb * per_month
    return gb * month_usd(month_gb, tiers, free_gb) / month_gb


def bill(out: Outcome, kind: str, prices: PriceBook, provider: str, share: float,
         per_month: float) -> Bill:  # fmt: skip
    """What ``share`` of the ``kind`` phase costs, priced as if repeated ``per_month``."""
    c, s = out.counters[kind], prices.provider(provider)
    gb = lambda x: x * share / 1e9  # noqa: E731
    egress = _ladder_usd(gb(c.bucket_bytes), per_month, s.egress_tiers, s.free_egress_gb_per_month)
    egress += gb(out.inter_region_bytes[kind]) * s.inter_region_rate()
    req = c.get * s.get_usd_per_1000 + (c.listing + out.put_requests[kind]) * s.put_usd_per_1000
    req *= share / 1000
    cdn = prices.cdn_for(provider) if out.config.route == "cdn" else None
    if cdn is not None:
        egress += gb(c.edge_fill_bytes) * cdn.fill_usd_per_gb.get(provider, 0.0)
        egress += _ladder_usd(
            gb(c.edge_bytes), per_month, cdn.egress_tiers, cdn.free_egress_gb_per_month
        )
        req += c.edge_requests * share * cdn.request_usd_per_1000 / 1000
    return Bill(egress, req)


def steady_deltas(out: Outcome, per: dict[int, dict[str, float]] | None = None) -> list[int]:
    """Deltas committed after 99 % of the fleet held the keyframe (all, for a warm fleet)."""
    cfg = out.config
    deltas = [v.number for v in cfg.versions if v.kind == "delta"]
    if cfg.start_held:
        return deltas
    full = cfg.versions[0].number
    p99 = quantiles(out.t_bcast_s(full))["p99"] if per is None else per[full]["p99"]
    return [v for v in deltas if out.stamps_s[v] >= out.stamps_s[full] + p99]


def publication_bill(out: Outcome, prices: PriceBook, provider: str, per_month: float) -> Bill:
    """A steady delta publication: what the fetches that read each steady delta moved and
    asked for (its payload's GETs, its manifest, a listing per fetch), the trainer's PUTs
    and inter-region copies, and the delta phase's wasted bytes, averaged over them."""
    cfg, s = out.config, prices.provider(provider)
    chosen = steady_deltas(out) or [v.number for v in cfg.versions if v.kind == "delta"]
    c, deltas = out.counters["delta"], sum(v.kind == "delta" for v in cfg.versions)
    fetches = statistics.mean(out.fetched.get(v, 0) for v in chosen)
    size = statistics.mean(cfg.by_number(v).stored_bytes for v in chosen)
    reads = max(1, math.ceil(size / cfg.request_bytes))
    gb = (fetches * size + c.wasted_bytes / deltas) / 1e9
    cdn = prices.cdn_for(provider) if cfg.route == "cdn" else None
    egress = out.inter_region_bytes["delta"] / deltas / 1e9 * s.inter_region_rate()
    puts = out.put_requests["delta"] / deltas
    if cdn is None:
        egress += _ladder_usd(gb, per_month, s.egress_tiers, s.free_egress_gb_per_month)
        gets = fetches * (reads + 1)
        req = (gets * s.get_usd_per_1000 + (fetches + puts) * s.put_usd_per_1000) / 1000
        return Bill(egress, req)
    fills = min(len(out.regions) * cfg.cdn_edges, fetches)  # each edge fills once
    egress += fills * size / 1e9 * cdn.fill_usd_per_gb.get(provider, 0.0)
    egress += _ladder_usd(gb, per_month, cdn.egress_tiers, cdn.free_egress_gb_per_month)
    origin_gets = fills * (math.ceil(size / OBJECT_BYTES) + 1)
    req = (origin_gets * s.get_usd_per_1000 + (fetches + puts) * s.put_usd_per_1000) / 1000
    req += fetches * (reads + 1) * cdn.request_usd_per_1000 / 1000
    return Bill(egress, req)


def money(out: Outcome, prices: PriceBook, provider: str) -> dict[str, Any]:
    cfg = out.config
    pubs = SECONDS_PER_MONTH / cfg.cadence_s
    workers = len(out.links)
    polls = workers * SECONDS_PER_MONTH / cfg.watch.poll_interval_s
    polls_usd = polls * prices.provider(provider).get_usd_per_1000 / 1000
    result: dict[str, Any] = {"polls_per_month": polls, "polls_usd_per_month": polls_usd}
    if any(v.kind == "delta" for v in cfg.versions):
        pub = publication_bill(out, prices, provider, pubs)
        result["per_publication"] = pub.to_dict()
        result["per_month"] = {
            "egress_usd": pub.egress_usd * pubs,
            "requests_usd": pub.requests_usd * pubs + polls_usd,
        }
    if not cfg.start_held:
        result["fleet_start"] = bill(out, "full", prices, provider, 1.0, 1.0).to_dict()
    return result


# -- the planner -----------------------------------------------------------------------------
def plan_inputs(links: FleetLinks, cfg: SimConfig, provider: str) -> PlanInputs:
    """The planner's inputs for the simulated run (a month of steps at the cadence)."""
    full, delta = cfg.versions[0].stored_bytes, _delta_bytes(cfg)
    t_train_s = cfg.cadence_s / KAPPA
    regions = len({w.region for w in links.workers})
    lag_s = cfg.replication_lag_s
    if cfg.route == "relay":  # its poll, the copy, its reads and the commit
        lag_s = (
            cfg.relay_poll_s / 2
            + delta * 8 / (cfg.relay_mbps * 1e6)
            + (2 + COMMIT_REQUESTS) * cfg.trainer_rtt_s
        )
    return PlanInputs(
        params=cfg.snapshot_bytes / 2,
        t_train_s=t_train_s,
        batch=64,
        staleness=KAPPA + 1,
        density=delta / cfg.snapshot_bytes,
        full_ratio=full / cfg.snapshot_bytes,
        fleet=links,
        workers=len(links),
        poll_interval_s=cfg.watch.poll_interval_s,
        install_mb_per_s=cfg.fetch.install_mb_per_s,
        regions=regions,
        replicate=cfg.route in ("relay", "replicate"),
        replication_lag_s=lag_s if regions > 1 else 0.0,
        trainer_uplink_gbps=cfg.trainer_uplink_mbps / 1000,
        trainer_rtt_s=cfg.trainer_rtt_s,
        provider=provider,
        cdn=None if cfg.route == "cdn" else "none",
        cdn_edges=cfg.cdn_edges * regions,
        keyframe_every=len(cfg.versions) - 1 or 1,
        steps=max(1, round(SECONDS_PER_MONTH / t_train_s)),
    )


def _delta_bytes(cfg: SimConfig) -> int:
    sizes = [v.stored_bytes for v in cfg.versions if v.kind == "delta"]
    return round(statistics.mean(sizes)) if sizes else cfg.versions[0].stored_bytes


def planner(links: FleetLinks, cfg: SimConfig, prices: PriceBook, provider: str) -> dict:
    """The closed-form planner's figures for the same inputs (see the module doc)."""
    inputs = plan_inputs(links, cfg, provider)
    prefix = "cdn" if cfg.route == "cdn" else "object_storage"
    copies = 1 if inputs.replicate else inputs.regions
    uplink = TrainerUplink(1, cfg.trainer_uplink_mbps / 1000, cfg.trainer_rtt_s)
    lag = inputs.replication_lag_s if inputs.replicate else 0.0
    result: dict[str, Any] = {}
    for kind, nbytes in (("full", cfg.versions[0].stored_bytes), ("delta", _delta_bytes(cfg))):
        gb, delta = nbytes / 1e9, kind == "delta"
        before = uplink.publish_s(gb, copies) + lag
        result[kind] = {
            k: before + object_storage_fleet_s(links, gb, cfg.snapshot_bytes / 1e9, inputs.fetch,
                                               f, delta)
            for k, f in FRACTIONS.items()
        }  # fmt: skip
        by_region: dict[str, list[float]] = {}
        for w in links.workers:
            by_region.setdefault(w.region, []).append(w.downlink_mbps)
        busiest = max(by_region.values(), key=len)
        rates = read_rates(busiest, gb, cfg.watch.poll_interval_s, cdn=cfg.route == "cdn",
                           payload_prefixes=cfg.payload_prefixes)  # fmt: skip
        result[kind]["peak_reads_per_s"] = rates.peak_per_s
        if math.isfinite(cfg.read_limit_per_s) and cfg.route != "cdn":  # estimate's remedy
            result[kind]["payload_prefixes_fit"] = payload_prefixes_fit(
                busiest, gb, cfg.watch.poll_interval_s, cfg.read_limit_per_s
            )
    try:
        row = evaluate(inputs, prices, f"{prefix}_delta", len(links))
    except InfeasiblePlanError:  # pragma: no cover - evaluate prices infeasible rows too
        return result
    months = row.step_s * inputs.steps / SECONDS_PER_MONTH
    result["usd"] = {
        "egress_per_publication": row.egress_usd_per_publication,
        "egress_per_month": row.egress_usd_per_run / months,
        "requests_per_month": row.requests_usd_per_run / months,
    }
    return result


def route_report(out: Outcome, prices: PriceBook, provider: str, wall_s: float) -> dict:
    return {
        "t_bcast_s": t_bcast(out),
        "requests": requests(out),
        "usd": money(out, prices, provider),
        "planner": planner(out.links, out.config, prices, provider),
        "wall_s": wall_s,
    }


def _f(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:,.1f}"


def print_table(report: dict[str, Any]) -> None:
    """The human table: per route, T_bcast beside the planner's, requests, dollars."""
    print(report["headline"])
    for route, r in report["routes"].items():
        t, plan = r["t_bcast_s"], r["planner"]
        print(f"\n{route} ({r['wall_s']:.0f} s to simulate)")
        print(f"  {'T_bcast s':<20} {'p50':>9} {'p90':>9} {'p99':>9}   planner p50/p90/p99")
        for kind in ("full", "delta", "delta_steady", "delta_steady_readers"):
            if kind in t:
                q, p = t[kind], plan["full" if kind == "full" else "delta"]
                others = f" ({q['others']:.1f} others a delta)" if "others" in q else ""
                print(
                    f"  {kind:<20} {_f(q['p50']):>9} {_f(q['p90']):>9} {_f(q['p99']):>9}   "
                    f"{p['p50']:,.1f} / {p['p90']:,.1f} / {p['p99']:,.1f}{others}"
                )
        q = r["requests"]
        print(
            f"  requests, peak on one prefix: {q['peak_keyframe_per_s']:,.0f}/s before the first "
            f"delta, {q['peak_deltas_per_s']:,.0f}/s after (planner: "
            f"{plan['full']['peak_reads_per_s']:,.0f} keyframe, "
            f"{plan['delta']['peak_reads_per_s']:,.0f} delta); {q['slowdowns']:,} SlowDowns, "
            f"{q['retries']:,} retries, {q['failed_fetches']:,} fetches started over"
        )
        for name, p in q["prefixes"].items():
            print(
                f"    {name:<12} peak {p['peak_per_s']:>9,.0f}/s  admitted "
                f"{p['peak_admitted_per_s']:>7,.0f}/s  mean {p['mean_per_s']:>8,.1f}/s"
            )
        u = r["usd"]
        if "per_publication" in u:
            pp, pm = u["per_publication"], u["per_month"]
            pu = plan.get("usd", {})
            print(
                f"  $ per delta publication: egress {pp['egress_usd']:,.2f}, requests "
                f"{pp['requests_usd']:,.2f} (planner egress "
                f"{pu.get('egress_per_publication', math.nan):,.2f})"
            )
            print(
                f"  $ per month: egress {pm['egress_usd']:,.0f}, requests "
                f"{pm['requests_usd']:,.0f} ({u['polls_usd_per_month']:,.0f} of it polls) "
                f"(planner {pu.get('egress_per_month', math.nan):,.0f} / "
                f"{pu.get('requests_per_month', math.nan):,.0f})"
            )
        if "fleet_start" in u:
            fs = u["fleet_start"]
            print(
                f"  $ fleet start (keyframe to all): egress {fs['egress_usd']:,.0f}, "
                f"requests {fs['requests_usd']:,.2f}"
            )
