"""The peer-chain baseline of benchmarks/wan_fleet.py: a store-and-forward relay per host.

Run as a script inside a host's namespace, it is that host's relay:
``LISTEN_IP PORT NEXT MIRROR_URL OUT_DIR`` (NEXT is ``ip:port`` of the delay line
towards the next host, or ``-`` at a chain's tail). For each version it accepts
one connection, receives the payload chunk by chunk and hands every whole chunk
to a sender thread that forwards it (store and forward: a chunk leaves only once
it has fully arrived), then installs that version exactly as a worker does:
``pull_to_file`` (verify, decode, apply the delta to the file it holds, write)
from MIRROR_URL, a local file:// copy of the run. The bytes relayed are a
stand-in of the version's size; the install is the product's own, so a chain
host pays what a bucket worker pays once its bytes are in. One JSON line per
version on stdout: when each chunk arrived and when the version was installed.

:func:`send_version` is the trainer's end: one connection per chain head.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from wanrl_s3 import Subscriber, load_snapshot, open_store, pull_to_file

HEADER = struct.Struct("!QQQQ")  # payload bytes, chunk bytes, version, have version (0: none)


def _recv_exact(conn: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the previous hop closed mid-chunk")
        got += n


def _forward(next_hop: str, header: bytes, chunks: queue.SimpleQueue[memoryview | None]) -> None:
    host, port = next_hop.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as out:
        out.sendall(header)
        while (chunk := chunks.get()) is not None:
            out.sendall(chunk)


def _one_version(conn: socket.socket, next_hop: str, sub: Subscriber, out_dir: Path) -> dict:
    head = bytearray(HEADER.size)
    _recv_exact(conn, memoryview(head))
    total, chunk, version, have_version = HEADER.unpack(head)
    payload = memoryview(bytearray(total))
    chunks: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
    sender = None
    if next_hop != "-":
        sender = threading.Thread(target=_forward, args=(next_hop, bytes(head), chunks))
        sender.start()
    arrived = []
    for start in range(0, total, chunk):
        piece = payload[start : start + chunk]
        _recv_exact(conn, piece)
        chunks.put(piece)
        arrived.append(time.time())
    received = arrived[-1] if arrived else time.time()
    chunks.put(None)
    have = load_snapshot(out_dir / f"v{have_version}.safetensors") if have_version else None
    pull_to_file(sub, out_dir / f"v{version}.safetensors", version, have=have)  # install
    installed = time.time()
    if sender is not None:
        sender.join()
    return {
        "received_at_s": received,
        "installed_at_s": installed,
        "version": version,
        "chunks_at_s": arrived,  # each chunk's last byte: where a hop falls behind
    }


def serve_relay(argv: list[str]) -> None:
    listen_ip, port, next_hop, mirror_url, out_dir = argv
    server = socket.create_server((listen_ip, int(port)))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with Subscriber(open_store(mirror_url)) as sub:
        print("ready", flush=True)
        while True:
            conn, _ = server.accept()
            with conn:
                print(json.dumps(_one_version(conn, next_hop, sub, Path(out_dir))), flush=True)


def send_version(
    endpoint: str, payload: bytes, chunk_bytes: int, version: int, have_version: int = 0
) -> None:
    """The trainer feeding one chain head (through the head's delay line)."""
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as out:
        out.sendall(HEADER.pack(len(payload), chunk_bytes, version, have_version))
        view = memoryview(payload)
        for start in range(0, len(payload), chunk_bytes):
            out.sendall(view[start : start + chunk_bytes])
        out.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            out.recv(1)  # the head closes once it has it all


if __name__ == "__main__":
    serve_relay(sys.argv[1:])
