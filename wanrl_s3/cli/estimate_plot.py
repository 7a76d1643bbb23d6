"""Broadcast time and cost per run against fleet size, one line per topology.

matplotlib is optional (``wanrl-s3[plot]``) and imported only when the plot is
drawn (cli/figures.py), so the estimate itself never pays for it.
"""

from __future__ import annotations

from pathlib import Path

from ..cost.plan import Plan, sweep
from ..cost.prices import PriceBook
from ..cost.topology import star_unlimited_s
from .figures import new_figure, save_png

#: At most this many fleet sizes per line; larger fleets are sampled evenly.
MAX_POINTS = 200


def fleet_axis(plan: Plan) -> range:
    """1 .. twice the largest fleet the plan sized (at least 20), thinned to MAX_POINTS."""
    largest = max(r.fleet_workers for r in plan.by_topology)
    top = max(20, 2 * largest)
    return range(1, top + 1, max(1, top // MAX_POINTS))


def plot_plan(plan: Plan, prices: PriceBook, path: str | Path) -> Path:
    """Write the two-panel PNG and return its path."""
    i, sizes = plan.inputs, fleet_axis(plan)
    fig = new_figure(10.0, 7.0)
    t_ax, usd_ax = fig.subplots(2, 1, sharex=True)
    for chosen in plan.by_topology:
        rows = sweep(i, prices, chosen.name, sizes)
        (line,) = t_ax.plot(list(sizes), [r.t_bcast_s for r in rows], label=chosen.label)
        usd_ax.plot(
            list(sizes), [r.total_usd_per_step * i.steps for r in rows], color=line.get_color()
        )
        marker = "o" if chosen.feasible else "x"
        t_ax.plot([chosen.fleet_workers], [chosen.t_bcast_s], marker, color=line.get_color())
    t_ax.axhline(i.window_s, linestyle="--", color="black", label="kappa*T_train (gate)")
    floor_s = star_unlimited_s(i.full_gb, i.downlink_mbps)
    t_ax.axhline(
        floor_s, linestyle=":", color="grey", label=f"floor, full version at {i.full_ratio:g}x"
    )
    t_ax.set_yscale("log")
    t_ax.set_ylabel("T_bcast (s)")
    t_ax.set_title(
        f"{i.params:.3g} params, kappa={i.kappa}, {i.downlink_mbps:g}/{i.uplink_mbps:g} Mbps"
    )
    fig.legend(loc="outside right center", fontsize="small")
    usd_ax.set_ylabel(f"cost per run, {i.steps} steps (USD)")
    usd_ax.set_xlabel("fleet size (workers); o = sized fleet, x = gate fires")
    return save_png(fig, path)
