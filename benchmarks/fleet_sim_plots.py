"""The pictures of docs/scale.md, from benchmarks/fleet_sim.py's JSON.

    .venv/bin/python benchmarks/fleet_sim_plots.py t90 OUT.png RUN.json [RUN.json ...]
    .venv/bin/python benchmarks/fleet_sim_plots.py requests OUT.png TIMELINE.json [...]

``t90``: T_bcast at 90 % against fleet size, per route, keyframe and steady deltas,
the planner's dashed beside. ``requests``: the requests a second offered to each
prefix of the first region around one delta publication (``--timeline`` files: one
per layout), with the prefix's limit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

VERSION = "6"  # the delta whose burst is drawn: mid-run, the fleet warm
COLORS = {"bucket": "tab:blue", "cdn": "tab:green", "relay": "tab:orange"}


def plot_t90(out: Path, runs: list[Path]) -> None:
    reports = sorted((json.loads(p.read_text()) for p in runs), key=lambda r: r["inputs"]["hosts"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    panels = ((axes[0], "full", "keyframe"), (axes[1], "delta_steady", "1 % delta, steady"))
    for ax, kind, title in panels:
        for route, color in COLORS.items():
            sizes = [r["inputs"]["workers"] for r in reports if route in r["routes"]]
            sim = [r["routes"][route]["t_bcast_s"][kind]["p90"] for r in reports
                   if route in r["routes"]]  # fmt: skip
            plan_kind = "full" if kind == "full" else "delta"
            plan = [r["routes"][route]["planner"][plan_kind]["p90"] for r in reports
                    if route in r["routes"]]  # fmt: skip
            ax.plot(sizes, sim, "o-", color=color, label=f"{route}, simulated")
            ax.plot(sizes, plan, "x--", color=color, alpha=0.6, label=f"{route}, planner")
        ax.set_xscale("log")
        ax.set_xlabel("workers (three regions)")
        ax.set_ylabel("T_bcast at 90 % (s)")
        ax.set_title(f"8B policy, {title}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_requests(out: Path, timelines: list[Path]) -> None:
    fig, ax = plt.subplots(figsize=(11, 4.2))
    limit = None
    for path in timelines:
        t = next(iter(json.loads(path.read_text()).values()))  # the file's (first) route
        label, w = path.stem, t["window_s"]
        stamp = t["stamps_s"][VERSION]
        first = sorted(t["offered_per_s"])[0].split("/")[0]
        for name, series in sorted(t["offered_per_s"].items()):
            if not name.startswith(first + "/"):
                continue
            lo, hi = int((stamp - 5) / w), int((stamp + 60) / w)
            xs = [i * w - stamp for i in range(lo, min(hi, len(series)))]
            ax.step(xs, series[lo : lo + len(xs)], where="post", label=f"{label}: {name}")
        limit = t["limit_per_s"] or limit
    if limit:
        ax.axhline(limit, color="red", linestyle=":", label=f"limit {limit:,.0f}/s per prefix")
    ax.set_xlabel("seconds after the delta's manifest stamp")
    ax.set_ylabel("requests offered a second")
    ax.set_title("one region's bucket around a delta publication")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[1] not in ("t90", "requests"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    kind, out, inputs = sys.argv[1], Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]]
    (plot_t90 if kind == "t90" else plot_requests)(out, inputs)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
