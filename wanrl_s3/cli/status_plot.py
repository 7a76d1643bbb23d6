"""``wanrl-s3 status --plot``: versions per worker over time, and T_bcast per version.

The series come from :func:`wanrl_s3.fleet.timeline.fleet_timeline` (pure, tested
on their own); this only draws them: the top panel a step line per worker, the
commits as a dashed line and each worker's last error as a red cross at the
version it held; the bottom panel T_bcast at the fraction per version, for the
fleet and for each region.
"""

from __future__ import annotations

from pathlib import Path

from ..fleet.broadcast_times import FleetReport
from ..fleet.timeline import FLEET, fleet_timeline
from .figures import new_figure, save_png

#: Workers drawn with a legend entry each; more share one grey style and no legend.
MAX_LABELLED = 12


def plot_status(report: FleetReport, path: str | Path) -> Path:
    """Write the two-panel PNG of ``report`` and return its path."""
    line = fleet_timeline(report)
    fig = new_figure(10.0, 7.5)
    versions_ax, bcast_ax = fig.subplots(2, 1)
    crowded = len(line.workers) > MAX_LABELLED
    for worker in line.workers:
        style = {"color": "grey", "alpha": 0.5} if crowded else {"label": worker.label}
        versions_ax.step(worker.x, worker.y, where="post", **style)
    versions_ax.step(
        line.published.x,
        line.published.y,
        where="post",
        linestyle="--",
        color="black",
        label="published",
    )
    versions_ax.plot(
        line.failures.x, line.failures.y, "x", color="red", markersize=9, label=line.failures.label
    )
    versions_ax.set_xlabel("seconds since the oldest version shown was published")
    versions_ax.set_ylabel("version installed")
    versions_ax.set_title(
        f"{len(line.workers)} workers"
        + (f" (drawn in grey: more than {MAX_LABELLED})" if crowded else "")
    )
    versions_ax.legend(loc="upper left", fontsize="small")
    for series in line.bcast:  # the fleet first, thick, so each region shows over it
        if series.label == FLEET:
            bcast_ax.plot(series.x, series.y, "o-", color="black", linewidth=3, alpha=0.4,
                          markersize=9, label="whole fleet")  # fmt: skip
        else:
            bcast_ax.plot(series.x, series.y, "s:", label=f"region {series.label}")
    bcast_ax.set_xlabel("version")
    bcast_ax.set_ylabel(f"T_bcast at {line.fraction:.0%} (s)")
    bcast_ax.set_title("from each version's commit until that fraction of its fleet had it")
    bcast_ax.legend(loc="upper left", fontsize="small")
    for axis in (versions_ax.yaxis, bcast_ax.xaxis):
        axis.get_major_locator().set_params(integer=True)  # versions are whole numbers
    return save_png(fig, path)
