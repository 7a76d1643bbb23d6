"""Full pulls coded in byte planes against raw ones, link rate by link rate: the crossover.

    .venv/bin/python benchmarks/full_pull.py [--mib 512] [--mbit 200,1000,2500] [--repeat 2]
                                             [--rtt-ms 0] [--weights llama] [--concurrency 16]
                                             [--quiet-load 1.5 --quiet-wait-s 0]

A coded full snapshot moves about 0.67x the bytes of a raw one but costs the worker a
decode and a second hash. On a slow link the bytes decide and the coded pull wins; on a fast
one the worker's CPU does, and from some rate on the raw pull is faster. This benchmark
publishes one snapshot twice (``full_coding="planes"`` and ``"raw"``, two prefixes of one
moto bucket), then pulls both, in turns, best of --repeat, over one veth pair (as
benchmarks/wan.py builds it, root and iproute2 needed) shaped with tbf to each --mbit rate,
then with the shaping taken off, then from this namespace over loopback (no veth at all).

moto listens on the veth's address in the root namespace, so the pull reaches it with no
delay line: --rtt-ms 0 (default) adds no round trip, which changes a pull's time by a few
round trips but not the rate it moves bytes at here (see benchmarks/wan.py on the delay
line). --rtt-ms > 0 puts benchmarks/wan.py's delay line in front of moto for shaped rates.

Every pull is ``wanrl-s3 pull --json`` in its own process (every tensor verified, the file
written); seconds are its own; CPU seconds (user + system) are the pulling process's, less
the CPU of starting ``wanrl-s3 pull --help`` (measured once, printed). The crossover
printed last is derived two ways: where the measured planes/raw ratio reaches 1 between two
rates (interpolated in log rate), and raw bytes over the coded pull's loopback time (the
rate at which a link-bound raw pull takes as long as the coded pull does when the link is
no limit), and from CPU time alone (see ``cpu_bound``). On a shared machine,
--quiet-wait-s waits before each link for the load average to fall under --quiet-load;
every row shows the load average it started and ended at.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wan import (  # benchmarks/ is on sys.path[0]
    PREFIX,
    RAW_PREFIX,
    DelayLine,
    Link,
    Pull,
    best_pulls,
    common_options,
    describe,
    publish_full,
    pull,
    require_root,
    set_rate,
    shaped_link,
    snapshot_state,
)

from wanrl_s3.testing import local_moto, make_bucket


@dataclass(frozen=True)
class Case:
    label: str
    rate_mbit: float  # math.inf: no tbf
    planes: Pull
    raw: Pull
    load: tuple[float, float]  # 1-minute load average when the case started and ended

    @property
    def ratio(self) -> float:
        return self.planes.seconds / self.raw.seconds


@dataclass(frozen=True)
class Bench:
    args: argparse.Namespace
    endpoint: str  # moto, on the veth's address in this namespace
    work: Path
    raw_bytes: int
    startup_cpu_s: float  # CPU seconds of a pull process that does nothing

    def case(self, link: Link | None, far: str, label: str, rate_mbit: float) -> Case:
        """Both versions pulled --repeat times in turns through ``link`` (None: from here)."""
        conc = ("--concurrency", str(self.args.concurrency))
        started = wait_quiet(self.args.quiet_load, self.args.quiet_wait_s)

        def once(prefix: str, _: int) -> Pull:
            return pull(link, far, prefix, self.work / f"{prefix}.safetensors", *conc)

        best = best_pulls(self.args.repeat, once)
        load = (started, os.getloadavg()[0])
        case = Case(label, rate_mbit, best[PREFIX], best[RAW_PREFIX], load)
        print(self.row(case), flush=True)
        return case

    def row(self, case: Case) -> str:
        raw_mb_s = self.raw_bytes / case.raw.seconds / 1e6
        return (
            f"{case.label:<24} {case.raw.seconds:7.2f} {case.planes.seconds:8.2f} "
            f"{case.ratio:10.3f} {raw_mb_s:8.0f} {case.raw.cpu_s - self.startup_cpu_s:9.2f} "
            f"{case.planes.cpu_s - self.startup_cpu_s:12.2f} {case.planes.verify_s:15.2f} "
            f"{case.load[0]:5.2f}-{case.load[1]:.2f}"
        )


def wait_quiet(load: float, most_s: float) -> float:
    """Wait (at most ``most_s``) for a 1-minute load average under ``load``: on a shared
    machine, other jobs' CPU would be timed as the pull's. Returns the load it starts at."""
    deadline = time.monotonic() + most_s
    while os.getloadavg()[0] >= load and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def all_cases(bench: Bench, link: Link) -> list[Case]:
    """Each shaped rate, then the veth unshaped, then loopback from this namespace."""
    cases = []
    for rate in bench.args.mbit:
        set_rate(link, rate)
        with contextlib.ExitStack() as stack:
            far = bench.endpoint
            if bench.args.rtt_ms > 0:
                port = int(far.rsplit(":", 1)[1])
                line = DelayLine(link.host_ip, port, bench.args.rtt_ms / 2000, link.host_ip)
                stack.callback(line.close)
                far = line.endpoint
            cases.append(bench.case(link, far, f"{rate:g} Mbit/s (tbf)", rate))
    set_rate(link, None)
    cases.append(bench.case(link, bench.endpoint, "veth, not shaped", math.inf))
    cases.append(bench.case(None, bench.endpoint, "loopback (no namespace)", math.inf))
    return cases


HEADER = (
    f"{'link':<24} {'raw s':>7} {'planes s':>8} {'planes/raw':>10} {'raw MB/s':>8} "
    f"{'raw CPU s':>9} {'planes CPU s':>12} {'planes verify_s':>15} {'load':>9}"
)


def crossover(cases: list[Case], bench: Bench) -> list[str]:
    """The estimates of the rate above which a raw pull is faster (see the docstring)."""
    raw_bytes = bench.raw_bytes
    lines = []
    shaped = [c for c in cases if math.isfinite(c.rate_mbit)]
    for low, high in itertools.pairwise(shaped):
        if low.ratio < 1 <= high.ratio:
            t = -math.log(low.ratio) / (math.log(high.ratio) - math.log(low.ratio))
            rate = low.rate_mbit * (high.rate_mbit / low.rate_mbit) ** t
            lines.append(f"measured: planes/raw reaches 1 near {rate:.0f} Mbit/s "
                         f"(between {low.label} and {high.label}, log-interpolated)")  # fmt: skip
    if not lines:
        lines.append("measured: planes/raw does not cross 1 between the shaped rates")
    loop = cases[-1]
    lines.append(
        f"derived: raw bytes / coded pull over loopback = {raw_bytes / 1e6:.1f} MB / "
        f"{loop.planes.seconds:.2f} s = {raw_bytes * 8 / loop.planes.seconds / 1e6:.0f} Mbit/s; "
        f"the raw pull's own ceiling here: {raw_bytes * 8 / loop.raw.seconds / 1e6:.0f} Mbit/s"
    )
    return [*lines, cpu_bound(cases, bench)]


def cpu_bound(cases: list[Case], bench: Bench) -> str:
    """The crossover if the pull had the machine's cores to itself: the coded pull's least CPU
    time, spread over every core, against a raw pull that moves raw bytes at the link rate.
    Less sensitive to other jobs than the loopback time (they take wall time, less CPU)."""
    cores = os.cpu_count() or 1
    planes = min(c.planes.cpu_s for c in cases) - bench.startup_cpu_s
    raw = min(c.raw.cpu_s for c in cases) - bench.startup_cpu_s
    mbit = bench.raw_bytes * 8 / 1e6
    return (
        f"CPU model: least CPU per pull, planes {planes:.2f} s, raw {raw:.2f} s; on {cores} "
        f"cores the coded pull cannot beat {planes / cores:.2f} s, which a link-bound raw pull "
        f"matches at {mbit * cores / planes:.0f} Mbit/s (raw's own CPU ceiling: "
        f"{mbit * cores / raw:.0f} Mbit/s)"
    )


def startup_cpu_s(repeat: int = 3) -> float:
    """CPU seconds (user + system) of ``wanrl-s3 pull --help``: interpreter and imports."""
    argv = [sys.executable, "-m", "wanrl_s3.cli", "pull", "--help"]
    spent = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(spent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=512.0, help="snapshot size (default 512 MiB)")
    ap.add_argument("--mbit", type=lambda s: [float(x) for x in s.split(",") if x],
                    default=[200.0, 1000.0, 2500.0], help="tbf rates (200,1000,2500)")  # fmt: skip
    ap.add_argument("--rtt-ms", type=float, default=0.0, help="round trip at shaped rates (0)")
    ap.add_argument("--quiet-load", type=float, default=1.5,
                    help="before each link, wait for a load average under this (1.5)")  # fmt: skip
    ap.add_argument("--quiet-wait-s", type=float, default=0.0,
                    help="... for at most this long (default 0: do not wait)")  # fmt: skip
    common_options(ap, weights="llama")
    args = ap.parse_args()
    require_root("benchmarks/full_pull.py")
    work = Path(tempfile.mkdtemp(prefix="wanrl-full-pull-"))
    try:
        with (
            shaped_link(args.mbit[0] if args.mbit else None) as link,
            local_moto(ip_address=link.host_ip) as endpoint,
        ):
            state = snapshot_state(args.weights, args.mib, work)
            make_bucket(endpoint, "bench")
            planes_bytes = publish_full(endpoint, state, PREFIX, "planes")
            raw_bytes = publish_full(endpoint, state, RAW_PREFIX, "raw")
            del state
            bench = Bench(args, endpoint, work, raw_bytes, startup_cpu_s())
            print(
                f"snapshot: {raw_bytes / 2**20:.1f} MiB of {describe(args.weights)}; stored "
                f"raw {raw_bytes / 1e6:.1f} MB, planes {planes_bytes / 1e6:.1f} MB "
                f"({planes_bytes / raw_bytes:.3f}x); best of {args.repeat}, in turns; round trip "
                f"{args.rtt_ms:g} ms at shaped rates; {os.cpu_count()} cores; CPU s exclude "
                f"{bench.startup_cpu_s:.2f} s of start-up"
            )
            print(HEADER)
            cases = all_cases(bench, link)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in crossover(cases, bench):
        print(line)


if __name__ == "__main__":
    main()
