"""Uploads are checked end to end: a byte damaged on the way to the store is never committed.

Every PUT and part carries an S3 checksum of its body; a service that validates
(SeaweedFS here, as S3) refuses a damaged body (400 BadDigest) and the upload is
sent again; one that only echoes its own checksum is caught by comparing it with
ours. The proxy in ``checksum_gate`` damages the body; the echoing service is
moto behind it (a real server here validates, so cannot play that part).

A service that validates nothing at all (moto) is covered by the ETag check:
tests/store/test_upload_etag.py.
"""

from __future__ import annotations

import base64
import zlib

import boto3
import ml_dtypes
import numpy as np
import pytest

from wanrl_s3 import PublishConfig, Publisher, Subscriber
from wanrl_s3.store import open_store
from wanrl_s3.testing import make_bucket

from .checksum_gate import checksum_gate

MiB = 2**20


def policy(total_bytes: int) -> dict[str, np.ndarray]:
    """Random bf16 tensors (nothing compresses), ``total_bytes`` in all."""
    rng = np.random.default_rng(7)
    half = total_bytes // 4
    return {
        f"layer.{i}.weight": rng.integers(0, 2**16, half // 2, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(4)
    }


def test_moto_does_not_check_upload_checksums(moto_endpoint: str) -> None:
    """Why the gate exists: moto stores a body whose checksum header is wrong.

    If this starts failing, moto validates, and the tests below could use it directly.
    """
    bucket = make_bucket(moto_endpoint)
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    wrong = base64.b64encode(zlib.crc32(b"other bytes").to_bytes(4, "big")).decode()
    resp = client.put_object(Bucket=bucket, Key="k", Body=b"the bytes", ChecksumCRC32=wrong)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"the bytes"


@pytest.mark.parametrize(
    "algorithm, check_value",
    [("CRC32", 0xCBF43926), ("CRC32C", 0xE3069283)],  # the standard check values
)
def test_checksums_are_the_standard_ones(algorithm: str, check_value: int) -> None:
    from wanrl_s3.store.s3 import upload_checksum

    if algorithm == "CRC32C":
        pytest.importorskip("google_crc32c")
    expected = base64.b64encode(check_value.to_bytes(4, "big")).decode()
    assert upload_checksum(b"123456789", algorithm) == expected


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C"])
def test_a_part_buffer_has_the_checksum_of_its_bytes(algorithm: str) -> None:
    """Parts are sent from the writer's buffers (bytearray); google-crc32c takes only
    bytes, so a buffer is summed in pieces: the same value, whatever the length."""
    from wanrl_s3.store.s3 import upload_checksum

    if algorithm == "CRC32C":
        pytest.importorskip("google_crc32c")
    rng = np.random.default_rng(3)
    for size in (0, 1, 64 * 1024, 64 * 1024 + 1, 3 * MiB + 12345):
        data = rng.integers(0, 256, size, np.uint8).tobytes()
        assert upload_checksum(bytearray(data), algorithm) == upload_checksum(data, algorithm)
        assert upload_checksum(memoryview(data), algorithm) == upload_checksum(data, algorithm)


SINGLE_PUT = (MiB // 4, r"\.bin$")  # one PUT of the payload object
SECOND_PART = (11 * MiB, r"\.bin\?.*partNumber=2")  # a part of a multipart upload
MANIFEST = (MiB // 4, r"manifest\.json")  # the commit point itself (If-None-Match)


@pytest.mark.parametrize(
    "mode, total_bytes, flip",
    [
        ("forward", *SINGLE_PUT),
        ("forward", *SECOND_PART),
        ("forward", *MANIFEST),
        # A service that echoes its own checksum without validating stores the
        # damaged body first: a resend repairs an unconditional PUT; a manifest
        # created If-None-Match would stay claimed (see the module docstring).
        ("echo", *SINGLE_PUT),
        ("echo", *SECOND_PART),
    ],
    ids=["validate-put", "validate-part", "validate-manifest", "echo-put", "echo-part"],
)
def test_a_byte_flipped_in_an_upload_is_sent_again_not_committed(
    request: pytest.FixtureRequest, total_bytes: int, flip: str, mode: str
) -> None:
    # echo: moto, the one upstream here that stores a body its checksum does not match
    endpoint = request.getfixturevalue("s3_endpoint" if mode == "forward" else "moto_endpoint")
    url = f"s3://{make_bucket(endpoint)}/run"
    state = policy(total_bytes)
    config = PublishConfig(delta="never", part_bytes=5 * MiB, concurrency=4)
    with checksum_gate(endpoint, flip=flip, times=1, mode=mode) as gate:
        store = open_store(url, endpoint_url=gate.url)
        result = Publisher(store, config).publish(state, 1)
        assert gate.flipped == 1, "the fault was not injected"
        assert gate.unchecked == [], "an upload went out without a checksum"
        assert gate.refused == (1 if mode == "forward" else 0)
    assert result.latest_moved
    direct = open_store(url, endpoint_url=endpoint)
    with Subscriber(direct) as sub:
        got = sub.fetch(1)
    assert {n: a.tobytes() for n, a in got.tensors.items()} == {
        n: a.tobytes() for n, a in state.items()
    }


def test_every_upload_names_one_algorithm(s3_endpoint: str) -> None:
    """A multipart upload declares the algorithm its parts use; S3 refuses a mix."""
    from wanrl_s3.store.s3 import CHECKSUM_ALGORITHM

    url = f"s3://{make_bucket(s3_endpoint)}/run"
    store = open_store(url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig(delta="never", part_bytes=5 * MiB)).publish(policy(11 * MiB), 1)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    bucket = url.split("/")[2]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    payload = next(k for k in keys if k.endswith(".bin"))
    head = client.head_object(Bucket=bucket, Key=payload, ChecksumMode="ENABLED")
    assert head.get(f"Checksum{CHECKSUM_ALGORITHM}"), head


def test_bodies_are_checked_by_their_signed_crc_not_hashed_into_the_signature(
    s3_endpoint: str,
) -> None:
    """A SHA-256 of every body for the signature costs a publish 0.6 CPU s per GB
    on each side (docs/results/transfer.md); the body's CRC32C, in a signed header, is
    what the service checks (the byte-flip tests above), so no body is hashed."""
    from wanrl_s3.store.s3 import CHECKSUM_ALGORITHM

    store = open_store(f"s3://{make_bucket(s3_endpoint)}/run", endpoint_url=s3_endpoint)
    sent: list[tuple[str, dict[str, str]]] = []

    def capture(request: object, **_: object) -> None:
        headers = {k.lower(): v.decode() if isinstance(v, bytes) else v
                   for k, v in request.headers.items()}  # type: ignore[attr-defined]  # fmt: skip
        sent.append((request.method, headers))  # type: ignore[attr-defined]

    store._client.meta.events.register("before-send.s3", capture)  # type: ignore[attr-defined]
    Publisher(store, PublishConfig(delta="never", part_bytes=5 * MiB)).publish(policy(11 * MiB), 1)
    uploads = [headers for method, headers in sent if method == "PUT"]
    assert len(uploads) >= 3, sent  # parts and the single PUTs
    for headers in uploads:
        assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD", headers
        assert f"x-amz-checksum-{CHECKSUM_ALGORITHM.lower()}" in headers, headers
        assert f"x-amz-checksum-{CHECKSUM_ALGORITHM.lower()}" in headers["authorization"]
