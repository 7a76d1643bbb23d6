"""One peer-chain hop of benchmarks/wan_fleet.py, with the receiver's uplink idle or busy.

    .venv/bin/python benchmarks/chain_hop.py [--down 27.1] [--up 14.5] [--rtt-ms 74] [--mb 5.53]

Root and iproute2 only. One host in its own namespace, shaped as wan_fleet.py shapes
it (tbf each way). It receives ``--mb`` through a delay line from this namespace,
once with its uplink idle and once while it sends as much as its uplink takes to a
sink here, as a chain host does while it forwards what it has received. If the second
is slower, the ACKs of what it receives are queued behind its own data on its uplink:
the peer-chain model (``wanrl_s3.cost.chain_worker_times_s``) has no term for that.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

from wan_fleet_net import Children, delay_line, namespaces  # benchmarks/ is on sys.path[0]

from wanrl_s3.cost import FleetLinks, WorkerLink

RECEIVER = r"""
import socket, sys, time
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    conn, _ = srv.accept()
    start, got = time.monotonic(), 0
    while chunk := conn.recv(1 << 16):
        got += len(chunk)
    print(got, time.monotonic() - start, flush=True)
    conn.close()
"""

UPLOADER = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
    block = bytes(1 << 20)
    for _ in range(int(sys.argv[3])):
        s.sendall(block)
"""


def sink(ip: str) -> tuple[socket.socket, int]:
    """A server here that reads and drops whatever the host uploads."""
    srv = socket.create_server((ip, 0))

    def drain() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                while conn.recv(1 << 16):
                    pass

    threading.Thread(target=drain, daemon=True).start()
    return srv, srv.getsockname()[1]


def send(endpoint: str, nbytes: int) -> None:
    host, port = endpoint.split("//")[-1].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.sendall(bytes(nbytes))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--down", type=float, default=27.1, help="receiver's downlink, Mbit/s")
    ap.add_argument("--up", type=float, default=14.5, help="receiver's uplink, Mbit/s")
    ap.add_argument("--rtt-ms", type=float, default=74.0, help="one-way delay of the hop x 2")
    ap.add_argument("--mb", type=float, default=5.53)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")):
        raise SystemExit("benchmarks/chain_hop.py needs root and iproute2 (ip, tc)")
    fleet = FleetLinks((WorkerLink("hop", args.down, args.up, args.rtt_ms),))
    nbytes = int(args.mb * 1e6)
    kids = Children()
    with namespaces(fleet) as (host,):
        try:
            recv = kids.start(host.argv(sys.executable, "-c", RECEIVER, host.far_ip, "7071"),
                              stdout=subprocess.PIPE)  # fmt: skip
            assert recv.stdout is not None and recv.stdout.readline().strip() == "ready"
            hop = delay_line(kids, "127.0.0.1", (host.far_ip, 7071), args.rtt_ms / 2000)
            srv, port = sink(host.host_ip)
            ideal = nbytes * 8 / (args.down * 1e6 * 1448 / 1514)
            print(f"hop: {args.mb:g} MB into {args.down:g} Mbit/s down, {args.up:g} up, "
                  f"{args.rtt_ms:g} ms; the model's transfer {ideal:.2f} s")  # fmt: skip
            for busy in [False, True] * args.repeat:
                uploader = None
                if busy:  # more than the uplink moves while the download runs
                    blocks = str(int(args.up * 1e6 / 8 * 3 * ideal / 2**20) + 1)
                    argv = host.argv(sys.executable, "-c", UPLOADER, host.host_ip, str(port),
                                     blocks)  # fmt: skip
                    uploader = kids.start(argv)
                    time.sleep(1.0)  # the uplink's queue is full
                send(hop, nbytes)
                got, seconds = recv.stdout.readline().split()
                if uploader is not None:
                    kids.stop([uploader])
                rate = int(got) * 8 / float(seconds) / 1e6
                print(f"uplink {'busy' if busy else 'idle'}: {float(seconds):.2f} s, "
                      f"{rate:.1f} Mbit/s ({float(seconds) / ideal:.2f}x the model)")  # fmt: skip
                time.sleep(0.5)
            srv.close()
        finally:
            kids.stop()


if __name__ == "__main__":
    main()
