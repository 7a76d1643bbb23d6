"""A byte flipped on the way to a store that checks no checksum (moto here) is caught.

The ETag of a plain upload is the MD5 of what was stored: a mismatch is read
back, the damaged object rewritten (a created manifest is removed and created
again), so the publish commits what was sent and readers install it.
"""

from __future__ import annotations

import botocore.exceptions as bx
import numpy as np
import pytest

from wanrl_s3 import ManifestError, PublishConfig, Publisher, Subscriber
from wanrl_s3.errors import TransientStoreError
from wanrl_s3.store import open_store
from wanrl_s3.store.s3 import CHECKSUM_ALGORITHM, S3Store
from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket


@pytest.mark.parametrize(
    "key", [r"/LATEST$", r"/manifest\.json$", r"\.bin$"], ids=["latest", "manifest", "payload"]
)
def test_a_flipped_upload_to_a_non_validating_service_is_rewritten(
    moto_endpoint: str, key: str
) -> None:
    url = f"s3://{make_bucket(moto_endpoint)}/run"
    weights = {"w": np.arange(100_000, dtype=np.float32)}
    rule = Rule(Fault.FLIP_REQUEST, method="PUT", key=key, count=1)
    with FaultProxy(moto_endpoint, rules=[rule]) as proxy:
        store = open_store(url, endpoint_url=proxy.url)
        Publisher(store, PublishConfig(delta="never")).publish(weights, 1)
        assert sum(proxy.counts.values()) == 1  # the byte was flipped once
    with Subscriber(open_store(url, endpoint_url=moto_endpoint)) as sub:
        got = sub.fetch("latest")
    assert got.version == 1 and got.tensors["w"].tobytes() == weights["w"].tobytes()


@pytest.mark.slow
def test_a_flipped_move_of_latest_never_leaves_a_pointer_readers_refuse(
    moto_endpoint: str,
) -> None:
    """LATEST's compare-and-swap lands damaged, one version after another (60 of them):
    the store writes it again over exactly its own damaged write. Taking that write for
    another publisher's move left, 5 times in 60 here, a pointer that still parsed but
    pinned another manifest digest: publish exited 0 and every reader refused it."""
    url = f"s3://{make_bucket(moto_endpoint)}/run"
    weights = np.arange(10_000, dtype=np.float32)
    refused = []
    with FaultProxy(moto_endpoint, seed=1) as proxy:
        publisher = Publisher(open_store(url, endpoint_url=proxy.url), PublishConfig())
        publisher.publish({"w": weights}, 1)
        for version in range(2, 62):
            proxy.set_rules([Rule(Fault.FLIP_REQUEST, method="PUT", key=r"/LATEST$", count=1)])
            assert publisher.publish({"w": weights + version}, version).latest_moved
            with Subscriber(open_store(url, endpoint_url=moto_endpoint)) as sub:
                try:
                    assert sub.fetch("latest").version == version
                except ManifestError as exc:
                    refused.append(f"v{version}: {exc}")
    assert refused == []


class _PartClient:
    """A boto3 stand-in for one UploadPart answer: an ETag that is no MD5 of the body.

    ``checks``: whether the service refuses a body whose checksum does not match (the
    store's probe, a PutObject with a wrong one, is answered BadDigest)."""

    def __init__(self, echo: bool, checks: bool) -> None:
        self.echo, self.checks = echo, checks

    def upload_part(self, **kwargs: object) -> dict[str, object]:
        resp: dict[str, object] = {"ETag": '"not-the-md5"'}
        if self.echo:  # the checksum it was sent, as S3 and SeaweedFS return theirs
            resp[f"Checksum{CHECKSUM_ALGORITHM}"] = kwargs[f"Checksum{CHECKSUM_ALGORITHM}"]
        return resp

    def put_object(self, **kwargs: object) -> dict[str, object]:
        if self.checks:
            error = {"Error": {"Code": "BadDigest", "Message": "no match"}}
            raise bx.ClientError(error, "PutObject")  # type: ignore[arg-type]
        return {"ETag": '"stored"'}

    def delete_objects(self, **kwargs: object) -> dict[str, object]:
        return {}


@pytest.mark.parametrize(
    "echo, checks, confirmed", [(True, True, True), (True, False, False), (False, True, False)]
)
def test_a_part_whose_checksum_the_service_returned_needs_no_md5(
    echo: bool, checks: bool, confirmed: bool
) -> None:
    """The MD5 (14x the CPU of CRC32C) is the check of last resort, for services that
    return no checksum of what they stored; one that does, and is seen to check what it
    is sent, has proved the bytes. One that returns what it was sent unchecked has not."""
    store = S3Store("bucket", client=_PartClient(echo, checks))
    store._confirm.etag_is_md5 = True  # type: ignore[attr-defined]  # as learnt from an earlier upload on a service like moto
    if confirmed:
        assert store._mpu_put("k", "upload", 1, b"x" * 100) == '"not-the-md5"'
    else:
        with pytest.raises(TransientStoreError, match="other bytes"):
            store._mpu_put("k", "upload", 1, b"x" * 100)
