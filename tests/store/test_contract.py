"""One contract, every backend: memory://, file:// and s3:// (SeaweedFS over HTTP).

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
    """SeaweedFS, a real S3 server."""

    @pytest.fixture
    def store(self, s3_endpoint: str) -> ObjectStore:
        bucket = make_bucket(s3_endpoint)
        return open_store(f"s3://{bucket}/runs/test", endpoint_url=s3_endpoint)

    @pytest.fixture
    def other_store(self, s3_endpoint: str) -> ObjectStore:
        bucket = make_bucket(s3_endpoint)
        return open_store(f"s3://{bucket}/other/prefix", endpoint_url=s3_endpoint)

    @pytest.fixture
    def store_through_faults(
        self, store: ObjectStore, s3_endpoint: str
    ) -> Iterator[tuple[ObjectStore, FaultProxy]]:
        """SeaweedFS refuses a body that fails its checksum; a service that checks
        nothing (moto) is tests/store/test_upload_confirmation.py's."""
        with through_fault_proxy(store, s3_endpoint) as pair:
            yield pair
