"""One contract, every backend: memory://, file:// and s3:// (moto over HTTP).

The contract itself lives in :mod:`wanrl_s3.testing` so that third-party backends
run the same suite; here each of ours subclasses it. gs:// and az:// run it
against their emulators in ``test_contract_clouds.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import FaultProxy, StoreContract, make_bucket, through_fault_proxy


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> ObjectStore:
        return open_store(f"memory://{uuid.uuid4().hex}")


class TestLocalStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return open_store(f"file://{tmp_path}/store")


class TestS3Store(StoreContract):
    """moto, until a real S3 server runs the suite too."""

    @pytest.fixture
    def store(self, moto_endpoint: str) -> ObjectStore:
        bucket = make_bucket(moto_endpoint)
        return open_store(f"s3://{bucket}/runs/test", endpoint_url=moto_endpoint)

    @pytest.fixture
    def other_store(self, moto_endpoint: str) -> ObjectStore:
        bucket = make_bucket(moto_endpoint)
        return open_store(f"s3://{bucket}/other/prefix", endpoint_url=moto_endpoint)

    @pytest.fixture
    def store_through_faults(
        self, store: ObjectStore, moto_endpoint: str
    ) -> Iterator[tuple[ObjectStore, FaultProxy]]:
        """moto checks no upload checksum: only what the store confirms keeps damage out."""
        with through_fault_proxy(store, moto_endpoint) as pair:
            yield pair
