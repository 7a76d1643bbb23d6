"""A connection dropped mid-download resumes at the last byte received, over real TCP.

A small proxy between the SDK and the server (SeaweedFS, fake-gcs-server, Azurite)
cuts the first large responses after a set number of bytes; the read must
still complete, bit for bit, by asking only for the bytes it is missing.
"""

from __future__ import annotations

import re
import socket
import threading
from urllib.parse import urlsplit

from tests.cloud_emulators import az_url, azurite_connection, gcs_endpoint, gs_url
from wanrl_s3.store import ObjectStore, RetryPolicy, open_store
from wanrl_s3.store.retry import FakeClock
from wanrl_s3.testing import azurite_connection_string_parts

__all__ = ["az_url", "azurite_connection", "gcs_endpoint", "gs_url"]  # fixtures


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
        m = re.search(rb"\r\n(?:x-ms-)?range: bytes=(\d+-\d+)", request, flags=re.I)
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


def _resumes_from_the_last_byte(
    url: str, direct: ObjectStore, upstream: str, **options: str
) -> None:
    """Read 2 MiB through a proxy that cuts the first two responses; check what was asked."""
    data = bytes(range(256)) * 8192  # 2 MiB
    direct.put_bytes("blob.bin", data)
    address = urlsplit(upstream)
    proxy = CuttingProxy((address.hostname or "", address.port or 80), cut_after=300_000, cuts=2)
    try:
        clock = FakeClock()
        proxied = address._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        store = open_store(url, endpoint_url=proxied, retry=RetryPolicy(clock=clock), **options)
        buf = bytearray(len(data) - 1000)
        store.read_into("blob.bin", 1000, memoryview(buf))
    finally:
        proxy.close()
    assert bytes(buf) == data[1000:]
    assert len(proxy.ranges) == 3, proxy.ranges  # two cut short, each resumed where it stopped
    starts = [int(r.split("-")[0]) for r in proxy.ranges]
    assert starts[0] == 1000 and starts[1] > 1000 + 100_000 and starts[2] > starts[1] + 100_000
    assert clock.sleeps == []  # bytes kept arriving: no backoff was needed


def test_s3_resumes_a_dropped_connection_from_the_last_byte(s3_url: str, s3_endpoint: str) -> None:
    direct = open_store(s3_url, endpoint_url=s3_endpoint)
    _resumes_from_the_last_byte(s3_url, direct, s3_endpoint)


def test_gs_resumes_a_dropped_connection_from_the_last_byte(gs_url: str, gcs_endpoint: str) -> None:
    direct = open_store(gs_url, endpoint_url=gcs_endpoint)
    _resumes_from_the_last_byte(gs_url, direct, gcs_endpoint)


def test_az_resumes_a_dropped_connection_from_the_last_byte(
    az_url: str, azurite_connection: str
) -> None:
    _, _, blob_endpoint = azurite_connection_string_parts(azurite_connection)
    _resumes_from_the_last_byte(az_url, open_store(az_url), blob_endpoint)
