"""The store contract, unchanged, against Google Cloud Storage and Azure Blob emulators.

gs:// runs against fake-gcs-server, which honours ``ifGenerationMatch`` (the
create-only manifest and LATEST's compare-and-swap) as GCS does; az:// against
Azurite, which honours ``If-None-Match: *`` and ``If-Match``.
"""

from __future__ import annotations

import pytest

from tests.cloud_emulators import az_url, azurite_connection, gcs_endpoint, gs_url
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import StoreContract, make_azure_container, make_gcs_bucket

__all__ = ["az_url", "azurite_connection", "gcs_endpoint", "gs_url"]  # fixtures


class TestGcsStore(StoreContract):
    @pytest.fixture
    def store(self, gs_url: str, gcs_endpoint: str) -> ObjectStore:
        return open_store(gs_url, endpoint_url=gcs_endpoint)

    @pytest.fixture
    def other_store(self, gcs_endpoint: str) -> ObjectStore:
        return open_store(f"gs://{make_gcs_bucket(gcs_endpoint)}/other", endpoint_url=gcs_endpoint)


class TestAzureStore(StoreContract):
    @pytest.fixture
    def store(self, az_url: str) -> ObjectStore:
        return open_store(az_url)

    @pytest.fixture
    def other_store(self, az_url: str, azurite_connection: str) -> ObjectStore:
        """Another container of the same account (az_url put its connection in the env)."""
        return open_store(f"az://{make_azure_container(azurite_connection)}/other")
