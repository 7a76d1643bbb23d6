"""A connection dropped mid-download resumes at the last byte received, over real TCP.

A small proxy between boto3 and the SeaweedFS server cuts the first large responses
after a set number of bytes; the read must still complete, bit for bit, by
asking only for the bytes it is missing.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator

import pytest

from wanrl_s3.store import RetryPolicy, open_store
from wanrl_s3.store.retry import FakeClock


class CuttingProxy:
    """Forwards 127.0.0.1 TCP to ``upstream``; cuts the first ``cuts`` big responses."""

    def __init__(self, upstream: tuple[str, int], cut_after: int, cuts: int) -> None:
        self.upstream, self.cut_after, self.cuts_left = upstream, cut_after, cuts
        self.ranges: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.upstream)
        request = client.recv(65536)
        m = re.search(rb"\r\nrange: bytes=(\d+-\d+)", request, flags=re.I)
        if m:
            self.ranges.append(m.group(1).decode())
        server.sendall(request)
        threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
        with self._lock:
            cut = m is not None and self.cuts_left > 0
            self.cuts_left -= cut
        sent = 0
        try:
            while data := server.recv(65536):
                if cut and sent + len(data) > self.cut_after:
                    client.sendall(data[: self.cut_after - sent])
                    client.shutdown(socket.SHUT_RDWR)  # drop the connection mid-body
                    break
                client.sendall(data)
                sent += len(data)
        finally:
            client.close()
            server.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[CuttingProxy]:
    host, port = s3_endpoint.removeprefix("http://").split(":")
    p = CuttingProxy((host, int(port)), cut_after=300_000, cuts=2)
    yield p
    p.close()


def test_dropped_connection_resumes_from_the_last_byte(
    s3_url: str, s3_endpoint: str, proxy: CuttingProxy
) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    open_store(s3_url, endpoint_url=s3_endpoint).put_bytes("blob.bin", data)
    clock = FakeClock()
    store = open_store(
        s3_url, endpoint_url=f"http://127.0.0.1:{proxy.port}", retry=RetryPolicy(clock=clock)
    )
    buf = bytearray(len(data) - 1000)
    store.read_into("blob.bin", 1000, memoryview(buf))
    assert bytes(buf) == data[1000:]
    assert len(proxy.ranges) == 3  # two cut short, each resumed where it stopped
    starts = [int(r.split("-")[0]) for r in proxy.ranges]
    assert starts[0] == 1000 and starts[1] > 1000 + 100_000 and starts[2] > starts[1] + 100_000
    assert clock.sleeps == []  # bytes kept arriving: no backoff was needed
