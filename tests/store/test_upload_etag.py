"""A byte flipped on the way to a store that checks no checksum (moto here) is caught.

The ETag of a plain upload is the MD5 of what was stored: a mismatch is read
back, the damaged object rewritten (a created manifest is removed and created
again), so the publish commits what was sent and readers install it.
"""

from __future__ import annotations

import numpy as np
import pytest

from wanrl_s3 import PublishConfig, Publisher, Subscriber
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


class _PartClient:
    """A boto3 stand-in for one UploadPart answer: an ETag that is no MD5 of the body."""

    def __init__(self, echo: bool) -> None:
        self.echo = echo

    def upload_part(self, **kwargs: object) -> dict[str, object]:
        resp: dict[str, object] = {"ETag": '"not-the-md5"'}
        if self.echo:  # the service's own checksum of what it stored, as S3 and SeaweedFS send
            resp[f"Checksum{CHECKSUM_ALGORITHM}"] = kwargs[f"Checksum{CHECKSUM_ALGORITHM}"]
        return resp


@pytest.mark.parametrize("echo", [True, False])
def test_a_part_whose_checksum_the_service_returned_needs_no_md5(echo: bool) -> None:
    """The MD5 (14x the CPU of CRC32C) is the check of last resort, for services that
    return no checksum of what they stored; one that does has proved the bytes."""
    store = S3Store("bucket", client=_PartClient(echo))
    store._etag_is_md5 = True  # as learnt from an earlier upload on a service like moto
    if echo:
        assert store._mpu_put("k", "upload", 1, b"x" * 100) == '"not-the-md5"'
    else:
        with pytest.raises(TransientStoreError, match="other bytes"):
            store._mpu_put("k", "upload", 1, b"x" * 100)
