"""The test proxies' SigV4 re-signing: an unchanged request gets back its own signature.

What botocore signed (paths, query strings with characters to encode, folded
header values, the payload hash) is signed again by wanrl_s3.testing.sigv4 from
the request as it goes over the wire; the two signatures must be equal, or a
real server would refuse every request a proxy re-signed.
"""

from __future__ import annotations

import urllib.parse

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from wanrl_s3.testing.sigv4 import resign

SECRET = "a-secret/with+chars"


def _signed(method: str, url: str, headers: dict[str, str], body: bytes) -> AWSRequest:
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    S3SigV4Auth(Credentials("AKIDEXAMPLE", SECRET), "s3", "us-east-1").add_auth(request)
    return request


def _wire(request: AWSRequest) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The request target and headers as they go over the wire (Host included)."""
    split = urllib.parse.urlsplit(request.url)
    target = (split.path + (f"?{split.query}" if split.query else "")).encode()
    headers = [(k.encode(), v.encode()) for k, v in request.headers.items()]
    return target, [(b"Host", split.netloc.encode()), *headers]


@pytest.mark.parametrize(
    "method, url, headers",
    [
        ("PUT", "http://127.0.0.1:9000/bucket/run/v/000000000001/manifest.json",
         {"If-None-Match": "*"}),
        ("PUT", "http://127.0.0.1:9000/bucket/run/LATEST", {"If-Match": '"0a1b"  '}),
        ("POST", "http://127.0.0.1:9000/bucket/run/x.bin?uploadId=2~a%2Fb%3D&partNumber=3", {}),
        ("GET", "http://127.0.0.1:9000/bucket?list-type=2&prefix=run%2Fv%2F&encoding-type=url",
         {"Range": "bytes=0-9"}),
    ],
)  # fmt: skip
def test_an_unchanged_request_gets_its_own_signature_back(
    method: str, url: str, headers: dict[str, str]
) -> None:
    request = _signed(method, url, headers, b"the body")
    target, wire = _wire(request)
    again = dict(resign(method.encode(), target, wire, SECRET))
    assert again[b"Authorization"] == request.headers["Authorization"].encode()


def test_a_dropped_header_is_signed_as_if_never_sent() -> None:
    url = "http://127.0.0.1:9000/bucket/k"
    without = _signed("PUT", url, {}, b"x")
    target, wire = _wire(_signed("PUT", url, {"If-None-Match": "*"}, b"x"))
    wire = [(k, without.headers["X-Amz-Date"].encode() if k == b"X-Amz-Date" else v)
            for k, v in wire]  # fmt: skip
    out = dict(resign(b"PUT", target, wire, SECRET, dropped=frozenset({b"if-none-match"})))
    assert b"If-None-Match" not in out
    assert out[b"Authorization"] == without.headers["Authorization"].encode()
