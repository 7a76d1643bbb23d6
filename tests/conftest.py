"""Shared fixtures: a real moto S3 server on 127.0.0.1, and stores of every kind.

S3 behaviour is tested over real HTTP against moto's ThreadedMotoServer (not
``mock_aws`` patching), started in its own process by
:func:`wanrl_s3.testing.local_s3`, so conditional writes, ranged GETs and
multipart uploads go through botocore and a server exactly as against S3.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import CREDENTIALS, local_s3, make_bucket


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 for the whole session; its endpoint URL."""
    for key, value in CREDENTIALS.items():
        os.environ.setdefault(key, value)
    os.environ.pop("AWS_PROFILE", None)
    with local_s3() as endpoint:
        yield endpoint


@pytest.fixture
def s3_url(moto_endpoint: str) -> str:
    """A fresh bucket on the moto server, as an s3:// URL with a run prefix."""
    return f"s3://{make_bucket(moto_endpoint)}/runs/test"


@pytest.fixture(params=["memory", "file", "s3"])
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The same test against every backend."""
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}"
    if request.param == "file":
        return f"file://{tmp_path}/store"
    return request.getfixturevalue("s3_url")


@pytest.fixture
def store_options(moto_endpoint: str) -> dict[str, str]:
    return {"endpoint_url": moto_endpoint}


@pytest.fixture
def store(store_url: str, moto_endpoint: str) -> ObjectStore:
    return open_store(store_url, endpoint_url=moto_endpoint)
