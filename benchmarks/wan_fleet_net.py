"""The network of benchmarks/wan_fleet.py: seeded links, shaped namespaces, delay lines, CPU.

Run as a script it is one delay line (benchmarks/wan.py's DelayLine) in its own
process: ``LISTEN_IP TARGET_IP TARGET_PORT ONE_WAY_S``; it prints its endpoint and
serves until its stdin closes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wan import DelayLine  # benchmarks/ is on sys.path[0]

HERE = Path(__file__).resolve()


# -- links ------------------------------------------------------------------------------
def draw_links(args: argparse.Namespace):
    """The seeded heterogeneous fleet, as the planner's FleetLinks."""
    from wanrl_s3.cost import FleetLinks, WorkerLink

    rng = random.Random(args.seed)
    lo, hi = args.down_mbit
    rows = []
    for i in range(args.hosts):
        down = round(lo * (hi / lo) ** rng.random() * args.rate_scale, 1)
        up = round(down * rng.uniform(0.5, 1.0), 1)
        rtt = round(rng.uniform(*args.rtt_ms), 1)
        rows.append(WorkerLink(f"host-{i}", down, up, rtt, "bench"))
    return FleetLinks(tuple(rows))


def _sh(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)}: {done.stderr.strip()}")


#: How long a packet may wait in a shaped link's queue (a bloated FIFO, as many are).
QUEUE_S = 0.1
#: How a host's uplink queues: see :func:`namespaces`.
UPLINK_QUEUES = ("acks-first", "fifo")
#: A u32 match for a bare TCP ACK: protocol 6, a 20-byte IP header, flags exactly ACK
#: (byte 33), IP length under 64.
BARE_ACK = ("match", "ip", "protocol", "6", "0xff", "match", "u8", "0x05", "0x0f", "at", "0",
            "match", "u8", "0x10", "0xff", "at", "33", "match", "u16", "0x0000", "0xffc0",
            "at", "2")  # fmt: skip


def _tbf(dev: str, mbit: float, ns: str | None = None) -> None:
    burst = max(16 * 1024, int(mbit * 1e6 / 8 / 250))  # 4 ms of traffic
    pre = ["ip", "netns", "exec", ns] if ns else []
    _sh(*pre, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
        "burst", str(burst), "latency", f"{QUEUE_S * 1e3:g}ms")  # fmt: skip


def _acks_first(dev: str, mbit: float, ns: str) -> None:
    """The same rate and the same FIFO for data, but bare ACKs skip the queue: what a
    host's fair-queueing qdisc (fq_codel, Linux's default; cake) does for a sparse flow.
    This kernel has no fq_codel, so htb with two classes and a u32 filter stand in."""
    tc = ["ip", "netns", "exec", ns, "tc"]
    packets = max(16, int(mbit * 1e6 / 8 * QUEUE_S / 1514))
    _sh(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20")
    _sh(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
        "rate", f"{mbit}mbit")  # fmt: skip
    for cls, share, prio in (("1:10", 0.1, "0"), ("1:20", 0.9, "1")):
        _sh(*tc, "class", "add", "dev", dev, "parent", "1:1", "classid", cls, "htb",
            "rate", f"{mbit * share:.3f}mbit", "ceil", f"{mbit}mbit", "prio", prio)  # fmt: skip
    _sh(*tc, "qdisc", "add", "dev", dev, "parent", "1:20", "pfifo", "limit", str(packets))
    _sh(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
        "u32", *BARE_ACK, "flowid", "1:10")  # fmt: skip


@dataclass(frozen=True)
class Host:
    index: int
    ns: str
    here: str  # root end of the veth (its tbf is the host's downlink)
    host_ip: str
    far_ip: str

    def argv(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]


@contextlib.contextmanager
def namespaces(
    fleet, uplink_queue: str = "acks-first", prefix: str = "wfl"
) -> Iterator[list[Host]]:
    """One namespace per host (``<prefix>-<pid>-<i>``), shaped each way; all removed on the
    way out.

    ``uplink_queue``: ``fifo`` (one tbf: a bare ACK waits behind up to :data:`QUEUE_S`
    of the host's own data) or ``acks-first`` (see :func:`_acks_first`). It matters to a
    host that receives while it sends, as a chain relay does."""
    if uplink_queue not in UPLINK_QUEUES:
        raise ValueError(f"uplink_queue must be one of {UPLINK_QUEUES}, got {uplink_queue!r}")
    shape_uplink = _acks_first if uplink_queue == "acks-first" else _tbf
    pid, made, short = os.getpid(), [], prefix[:2]
    try:
        for i, link in enumerate(fleet.workers):
            ns, here, there = (
                f"{prefix}-{pid}-{i}",
                f"{short}{i}h{pid}"[:15],
                f"{short}{i}f{pid}"[:15],
            )
            net = f"10.{100 + pid % 100}.{i + 1}"  # two runs at once do not collide
            host = Host(i, ns, here, f"{net}.1", f"{net}.2")
            _sh("ip", "netns", "add", ns)
            made.append(host)
            _sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
            _sh("ip", "link", "set", there, "netns", ns)
            _sh("ip", "addr", "add", f"{host.host_ip}/30", "dev", here)
            _sh("ip", "link", "set", here, "up")
            _tbf(here, link.downlink_mbps)
            for cmd in (
                ("ip", "addr", "add", f"{host.far_ip}/30", "dev", there),
                ("ip", "link", "set", there, "up"),
                ("ip", "link", "set", "lo", "up"),
            ):
                _sh(*host.argv(*cmd))
            shape_uplink(there, link.uplink_mbps, ns)
        yield made
    finally:
        for host in made:
            subprocess.run(["ip", "netns", "del", host.ns], capture_output=True)
            subprocess.run(["ip", "link", "del", host.here], capture_output=True)


@dataclass(frozen=True)
class Machine:
    """A machine of the regional store: its namespace and its address on the store's LAN."""

    ns: str
    ip: str


@contextlib.contextmanager
def store_lan(count: int, prefix: str = "wfl") -> Iterator[list[Machine]]:
    """``count`` machines of a regional store, a namespace each (``<prefix>-<pid>-store<k>``)
    on one bridge in this namespace: a data center's LAN, unshaped (the WAN is the hosts'
    links). This namespace has an address on it too, so the hosts' delay lines reach
    the store's gateway. All removed on the way out."""
    pid = os.getpid()
    bridge, net = f"{prefix[:2]}b{pid}"[:15], f"10.{250 + pid % 5}.{pid % 250}"  # no host's
    made: list[tuple[str, str]] = []
    _sh("ip", "link", "add", bridge, "type", "bridge")
    try:
        _sh("ip", "addr", "add", f"{net}.1/24", "dev", bridge)
        _sh("ip", "link", "set", bridge, "up")
        machines = []
        for k in range(count):
            ns, here, there = f"{prefix}-{pid}-store{k}", f"{prefix[:2]}s{k}h{pid}"[:15], "eth0"
            _sh("ip", "netns", "add", ns)
            made.append((ns, here))
            _sh("ip", "link", "add", here, "type", "veth", "peer", "name", f"{here}p"[:15])
            _sh("ip", "link", "set", f"{here}p"[:15], "netns", ns, "name", there)
            _sh("ip", "link", "set", here, "master", bridge, "up")
            for cmd in (
                ("ip", "addr", "add", f"{net}.{10 + k}/24", "dev", there),
                ("ip", "link", "set", there, "up"),
                ("ip", "link", "set", "lo", "up"),
            ):
                _sh("ip", "netns", "exec", ns, *cmd)  # fmt: skip
            machines.append(Machine(ns, f"{net}.{10 + k}"))
        yield machines
    finally:
        for ns, here in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


# -- helper processes --------------------------------------------------------------------
class Children:
    """Processes this run started, stopped (SIGTERM, then SIGKILL) on the way out."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str], **kw) -> subprocess.Popen[str]:
        proc = subprocess.Popen(argv, text=True, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, procs: list[subprocess.Popen[str]] | None = None) -> None:
        for p in procs or self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs or self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def delay_line(kids: Children, listen_ip: str, target: tuple[str, int], one_way_s: float) -> str:
    """A delay line in its own process (two cores: one GIL must not carry every byte)."""
    argv = [sys.executable, str(HERE), listen_ip, target[0], str(target[1])]
    proc = kids.start([*argv, repr(one_way_s)], stdout=subprocess.PIPE, stdin=subprocess.PIPE)
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def _serve_delay(listen_ip: str, target_ip: str, port: str, one_way_s: str) -> None:
    line = DelayLine(listen_ip, int(port), float(one_way_s), target_ip)
    print(line.endpoint, flush=True)
    sys.stdin.read()  # until the parent goes


# -- CPU -----------------------------------------------------------------------------------
def cpu_times() -> tuple[float, float]:
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)  # idle + iowait, all


def idle_share(before: tuple[float, float]) -> float:
    idle, total = cpu_times()
    return (idle - before[0]) / max(1.0, total - before[1])


def wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


if __name__ == "__main__":  # a delay line's own process: LISTEN_IP TARGET_IP PORT ONE_WAY_S
    _serve_delay(*sys.argv[1:5])
