"""The peer-chain baseline of benchmarks/wan_fleet.py: a store-and-forward relay per host.

Run as a script inside a host's namespace, it is that host's relay:
``LISTEN_IP PORT NEXT SNAPSHOT_BYTES OUT_FILE`` (NEXT is ``ip:port`` of the delay
line towards the next host, or ``-`` at a chain's tail). For each version it
accepts one connection, receives the payload chunk by chunk and hands every
whole chunk to a sender thread that forwards it (store and forward: a chunk
leaves only once it has fully arrived), then verifies (BLAKE3 over the
snapshot-sized buffer the payload is applied to) and writes that buffer to
OUT_FILE, the work a worker does to install. One JSON line per version on
stdout: when its last chunk arrived and when it was installed (wall clock).

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

import blake3

HEADER = struct.Struct("!QQ")  # payload bytes, chunk bytes


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


def _one_version(conn: socket.socket, next_hop: str, snapshot: bytearray, out_file: str) -> dict:
    head = bytearray(HEADER.size)
    _recv_exact(conn, memoryview(head))
    total, chunk = HEADER.unpack(head)
    payload = memoryview(bytearray(total))
    chunks: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
    sender = None
    if next_hop != "-":
        sender = threading.Thread(target=_forward, args=(next_hop, bytes(head), chunks))
        sender.start()
    for start in range(0, total, chunk):
        piece = payload[start : start + chunk]
        _recv_exact(conn, piece)
        chunks.put(piece)
    received = time.time()
    chunks.put(None)
    snapshot[: min(total, len(snapshot))] = payload[: len(snapshot)]  # apply
    digest = blake3.blake3(snapshot).hexdigest()  # verify
    with open(out_file, "wb") as f:  # install
        f.write(snapshot)
    installed = time.time()
    if sender is not None:
        sender.join()
    return {"received_at_s": received, "installed_at_s": installed, "hash": digest[:16]}


def serve_relay(argv: list[str]) -> None:
    listen_ip, port, next_hop, snapshot_bytes, out_file = argv
    snapshot = bytearray(int(snapshot_bytes))
    server = socket.create_server((listen_ip, int(port)))
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            print(json.dumps(_one_version(conn, next_hop, snapshot, out_file)), flush=True)


def send_version(endpoint: str, payload: bytes, chunk_bytes: int) -> None:
    """The trainer feeding one chain head (through the head's delay line)."""
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as out:
        out.sendall(HEADER.pack(len(payload), chunk_bytes))
        view = memoryview(payload)
        for start in range(0, len(payload), chunk_bytes):
            out.sendall(view[start : start + chunk_bytes])
        out.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            out.recv(1)  # the head closes once it has it all


if __name__ == "__main__":
    serve_relay(sys.argv[1:])
