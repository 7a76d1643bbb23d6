"""Re-sign an S3 request (AWS Signature Version 4) after a test proxy changed its headers.

A proxy that drops headers a client signed (``If-None-Match``, to play a store
that ignores conditional writes) breaks the request's signature, and a real
server refuses it. With the secret key, :func:`resign` computes the signature
of the request as it now is, over the headers it still has. It follows the
SigV4 canonical request for S3 (path as sent, sorted query, signed headers,
the ``x-amz-content-sha256`` payload hash), so re-signing an unchanged request
gives back its own signature (tests/testing/test_faults.py checks that).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import urllib.parse

_AUTH_RE = re.compile(
    rb"AWS4-HMAC-SHA256 Credential=(?P<credential>[^,]+),\s*SignedHeaders=(?P<signed>[^,]+),"
    rb"\s*Signature=(?P<signature>[0-9a-f]+)"
)


def resign(
    method: bytes,
    target: bytes,
    headers: list[tuple[bytes, bytes]],
    secret_key: str,
    *,
    dropped: frozenset[bytes] = frozenset(),
) -> list[tuple[bytes, bytes]]:
    """``headers`` without the ``dropped`` ones (lower-case names), signed again."""
    kept = [(k, v) for k, v in headers if k.lower() not in dropped]
    auth = next((v for k, v in kept if k.lower() == b"authorization"), None)
    match = _AUTH_RE.match(auth or b"")
    if match is None:
        return kept  # not a SigV4 header request (presigned, anonymous): nothing to sign
    signed = [h for h in match["signed"].split(b";") if h not in dropped]
    credential = match["credential"].decode()
    signature = sign(method, target, kept, signed, credential, secret_key)
    value = (
        f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders="
        f"{b';'.join(signed).decode()}, Signature={signature}"
    ).encode()
    return [(k, value if k.lower() == b"authorization" else v) for k, v in kept]


def sign(
    method: bytes,
    target: bytes,
    headers: list[tuple[bytes, bytes]],
    signed: list[bytes],
    credential: str,
    secret_key: str,
) -> str:
    """The hex signature of a request over its ``signed`` header names."""
    _, date, region, service, terminator = credential.split("/")
    values = {k.lower(): b" ".join(v.split()) for k, v in headers}
    path, _, query = target.partition(b"?")
    canonical = b"\n".join(
        [
            method,
            path,
            _canonical_query(query),
            b"".join(h + b":" + values.get(h, b"") + b"\n" for h in sorted(signed)),
            b";".join(sorted(signed)),
            values.get(b"x-amz-content-sha256", b"UNSIGNED-PAYLOAD"),
        ]
    )
    scope = f"{date}/{region}/{service}/{terminator}"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            values[b"x-amz-date"].decode(),
            scope,
            hashlib.sha256(canonical).hexdigest(),
        ]
    )
    key = f"AWS4{secret_key}".encode()
    for part in (date, region, service, terminator):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _canonical_query(query: bytes) -> bytes:
    pairs = []
    for item in query.split(b"&") if query else []:
        name, _, value = item.partition(b"=")
        pairs.append(
            (
                urllib.parse.quote(urllib.parse.unquote_to_bytes(name), safe="-_.~"),
                urllib.parse.quote(urllib.parse.unquote_to_bytes(value), safe="-_.~"),
            )
        )
    return "&".join(f"{n}={v}" for n, v in sorted(pairs)).encode()
