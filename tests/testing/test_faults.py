"""FaultProxy: each fault does what it says, against a real S3 server (SeaweedFS), and nothing else.

The client is a bare boto3 client with its own retries and checksums off, so
what reaches the server (or does not) is the proxy's doing alone; the store
tests at the end show the product's retry layer riding over the same faults.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import boto3
import botocore.exceptions as bx
import pytest
from botocore.config import Config

from wanrl_s3.errors import StoreError
from wanrl_s3.store import FakeClock, RetryPolicy, open_store
from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket

BODY = bytes(range(256)) * 400  # 100 KiB


def client(endpoint: str) -> Any:
    config = Config(
        retries={"total_max_attempts": 1},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        read_timeout=10,
    )
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=config)


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    return make_bucket(s3_endpoint)


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(s3_endpoint, seed=7, trickle_max_s=0.3) as p:
        yield p


def bit_difference(a: bytes, b: bytes) -> int:
    assert len(a) == len(b)
    return sum(bin(x ^ y).count("1") for x, y in zip(a, b, strict=True))


def test_passes_requests_through_and_counts_them(proxy: FaultProxy, bucket: str) -> None:
    c = client(proxy.url)
    c.put_object(Bucket=bucket, Key="a", Body=BODY)
    assert c.get_object(Bucket=bucket, Key="a")["Body"].read() == BODY
    assert c.head_object(Bucket=bucket, Key="a")["ContentLength"] == len(BODY)
    assert proxy.requests == 3 and proxy.repeats == 0 and not proxy.counts


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault.SLOW_DOWN, "SlowDown"),
        (Fault.INTERNAL_ERROR, "InternalError"),
        (Fault.RESET_BEFORE, None),
    ],
)
def test_faults_before_the_server_leave_it_untouched(
    proxy: FaultProxy, bucket: str, s3_endpoint: str, fault: Fault, error: str | None
) -> None:
    proxy.set_rules([Rule(fault, method="PUT", key=r"/a$", count=1)])
    with pytest.raises((bx.ClientError, bx.ConnectionClosedError, bx.EndpointConnectionError)) as e:
        client(proxy.url).put_object(Bucket=bucket, Key="a", Body=BODY)
    if error is not None:
        assert isinstance(e.value, bx.ClientError) and e.value.response["Error"]["Code"] == error
    direct = client(s3_endpoint)
    with pytest.raises(bx.ClientError):
        direct.head_object(Bucket=bucket, Key="a")  # the server never saw the PUT
    client(proxy.url).put_object(Bucket=bucket, Key="a", Body=BODY)  # count=1: spent
    assert direct.get_object(Bucket=bucket, Key="a")["Body"].read() == BODY
    assert proxy.counts == {fault: 1}


def test_reset_after_loses_the_response_of_a_write_that_happened(
    proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    proxy.set_rules([Rule(Fault.RESET_AFTER, method="PUT", count=1)])
    with pytest.raises(bx.ConnectionClosedError):
        client(proxy.url).put_object(Bucket=bucket, Key="a", Body=BODY, IfNoneMatch="*")
    stored = client(s3_endpoint).get_object(Bucket=bucket, Key="a")["Body"].read()
    assert stored == BODY  # the conditional create happened; the client cannot know
    with pytest.raises(bx.ClientError) as e:  # the client's retry now loses its own race
        client(proxy.url).put_object(Bucket=bucket, Key="a", Body=BODY, IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert proxy.repeats == 1


def test_truncated_body_fails_the_read(proxy: FaultProxy, bucket: str) -> None:
    c = client(proxy.url)
    c.put_object(Bucket=bucket, Key="a", Body=BODY)
    proxy.set_rules([Rule(Fault.TRUNCATE, method="GET", count=1)])
    with pytest.raises((bx.ResponseStreamingError, bx.IncompleteReadError)):
        c.get_object(Bucket=bucket, Key="a")["Body"].read()
    assert c.get_object(Bucket=bucket, Key="a")["Body"].read() == BODY
    assert proxy.counts == {Fault.TRUNCATE: 1}


def test_trickle_is_slow_but_whole_and_bounded(proxy: FaultProxy, bucket: str) -> None:
    c = client(proxy.url)
    c.put_object(Bucket=bucket, Key="a", Body=BODY)
    proxy.set_rules([Rule(Fault.TRICKLE, method="GET")])
    start = time.monotonic()
    assert c.get_object(Bucket=bucket, Key="a")["Body"].read() == BODY
    elapsed_s = time.monotonic() - start
    assert 0.3 <= elapsed_s < 5.0  # 100 KiB at 4 KiB per 20 ms would take 0.5 s; capped at 0.3


def test_flipped_request_byte_reaches_the_server(
    proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    proxy.set_rules([Rule(Fault.FLIP_REQUEST, method="PUT")])
    client(proxy.url).put_object(Bucket=bucket, Key="a", Body=BODY)
    stored = client(s3_endpoint).get_object(Bucket=bucket, Key="a")["Body"].read()
    assert bit_difference(stored, BODY) == 1


def test_flipped_response_byte_reaches_the_client(proxy: FaultProxy, bucket: str) -> None:
    c = client(proxy.url)
    c.put_object(Bucket=bucket, Key="a", Body=BODY)
    proxy.set_rules([Rule(Fault.FLIP_RESPONSE, method="GET", count=1)])
    assert bit_difference(c.get_object(Bucket=bucket, Key="a")["Body"].read(), BODY) == 1
    assert c.get_object(Bucket=bucket, Key="a")["Body"].read() == BODY


def test_rules_match_method_key_count_and_probability(proxy: FaultProxy, bucket: str) -> None:
    c = client(proxy.url)
    proxy.set_rules(
        [
            Rule(Fault.SLOW_DOWN, method="GET", key=r"/x$"),  # never: no GET of x below
            Rule(Fault.INTERNAL_ERROR, method="PUT", key=r"/b\d$", count=2),
            Rule(Fault.RESET_BEFORE, probability=0.0),
        ]
    )
    outcomes = []
    for key in ("a", "b1", "b2", "b3", "x"):
        try:
            c.put_object(Bucket=bucket, Key=key, Body=b"1")
            outcomes.append("ok")
        except bx.ClientError as exc:
            outcomes.append(exc.response["Error"]["Code"])
    assert outcomes == ["ok", "InternalError", "InternalError", "ok", "ok"]
    assert proxy.counts == {Fault.INTERNAL_ERROR: 2}


def test_the_seed_decides_which_requests_fail(s3_endpoint: str, bucket: str) -> None:
    def pattern(seed: int) -> list[bool]:
        rules = [Rule(Fault.SLOW_DOWN, method="HEAD", probability=0.5)]
        with FaultProxy(s3_endpoint, seed=seed, rules=rules) as p:
            c = client(p.url)
            out = []
            for _ in range(24):
                try:
                    c.head_object(Bucket=bucket, Key="missing")
                except bx.ClientError as exc:
                    out.append(exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503)
            return out

    assert pattern(1) == pattern(1)
    assert pattern(1) != pattern(2)
    assert 0 < sum(pattern(1)) < 24


class _RawEcho(socketserver.StreamRequestHandler):
    """Records the exact bytes of one request and answers with them, chunked."""

    received: ClassVar[list[bytes]] = []

    def handle(self) -> None:
        raw = b""
        while not raw.endswith(b"\r\n0\r\n\r\n") and not raw.endswith(b"\r\n0\r\nx-t: 1\r\n\r\n"):
            chunk = self.request.recv(65536)
            if not chunk:
                return
            raw += chunk
        self.received.append(raw)
        body = raw.split(b"\r\n\r\n", 1)[1]
        self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


def test_chunked_bodies_with_trailers_pass_byte_exact() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _RawEcho)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    request = (
        b"PUT /b/k HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Encoding: aws-chunked\r\nX-Amz-Trailer: x-t\r\n\r\n"
        b"5;chunk-signature=ab\r\nhello\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n"
    )
    try:
        with FaultProxy(f"http://127.0.0.1:{server.server_address[1]}") as p:
            host, port = p.url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(request)
                answer = b""
                while b"Content-Length" not in answer or not answer.endswith(request[-40:]):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
    finally:
        server.shutdown()
        server.server_close()
    assert _RawEcho.received == [request]
    body = request.split(b"\r\n\r\n", 1)[1]
    assert answer.endswith(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def test_stop_ends_every_connection_and_thread(s3_endpoint: str, bucket: str) -> None:
    p = FaultProxy(s3_endpoint).start()
    c = client(p.url)
    c.put_object(Bucket=bucket, Key="a", Body=b"1")  # leaves a kept-alive connection open
    p.stop()
    assert p._thread is not None and not p._thread.is_alive()
    with pytest.raises(bx.EndpointConnectionError):
        client(p.url).head_object(Bucket=bucket, Key="a")


def test_the_store_retry_layer_rides_over_every_fault(
    proxy: FaultProxy, bucket: str, s3_endpoint: str
) -> None:
    retry = RetryPolicy(
        max_attempts=4, base_delay_s=0.0, max_delay_s=0.0, clock=FakeClock(),
        throttled_attempts=6, throttled_base_delay_s=0.0, throttled_max_delay_s=0.0,
    )  # fmt: skip
    store = open_store(f"s3://{bucket}/run", endpoint_url=proxy.url, retry=retry)
    store.put_bytes("obj", BODY)
    for fault in (Fault.SLOW_DOWN, Fault.INTERNAL_ERROR, Fault.RESET_BEFORE, Fault.TRUNCATE):
        proxy.set_rules([Rule(fault, method="GET", count=2)])
        assert store.get_bytes("obj") == BODY
    # faults that never stop: the layer gives up, a throttled request on its own budget
    proxy.set_rules([Rule(Fault.INTERNAL_ERROR, method="GET")])
    with pytest.raises(StoreError, match="after 4 attempts"):
        store.get_bytes("obj")
    assert proxy.counts[Fault.INTERNAL_ERROR] == 2 + 4
    proxy.set_rules([Rule(Fault.SLOW_DOWN, method="GET")])
    with pytest.raises(StoreError, match="after 6 attempts"):
        store.get_bytes("obj")
    assert proxy.counts[Fault.SLOW_DOWN] == 2 + 6
