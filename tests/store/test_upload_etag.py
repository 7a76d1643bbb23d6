"""A byte flipped on the way to a store that checks no checksum (moto here) is caught.

The ETag of a plain upload is the MD5 of what was stored: a mismatch is read
back, the damaged object rewritten (a created manifest is removed and created
again), so the publish commits what was sent and readers install it.
"""

from __future__ import annotations

import numpy as np
import pytest

from wanrl_s3 import PublishConfig, Publisher, Subscriber
from wanrl_s3.store import open_store
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
