"""The store contract, unchanged, against Google Cloud Storage and Azure Blob emulators.

gs:// runs against fake-gcs-server, which honours ``ifGenerationMatch`` (the
create-only manifest and LATEST's compare-and-swap) as GCS does; az:// against
Azurite, which honours ``If-None-Match: *`` and ``If-Match``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cloud_emulators import az_url, azurite_connection, gcs_endpoint, gs_url
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import (
    FaultProxy,
    StoreContract,
    azurite_connection_string_parts,
    make_azure_container,
    make_gcs_bucket,
    through_fault_proxy,
)

__all__ = ["az_url", "azurite_connection", "gcs_endpoint", "gs_url"]  # fixtures


class TestGcsStore(StoreContract):
    @pytest.fixture
    def store(self, gs_url: str, gcs_endpoint: str) -> ObjectStore:
        return open_store(gs_url, endpoint_url=gcs_endpoint)

    @pytest.fixture
    def store_through_faults(
        self, store: ObjectStore, gcs_endpoint: str
    ) -> Iterator[tuple[ObjectStore, FaultProxy]]:
        """fake-gcs-server checks no upload checksum, but reports the CRC32C of what it stored."""
        with through_fault_proxy(store, gcs_endpoint) as pair:
            yield pair

    @pytest.fixture
    def other_store(self, gcs_endpoint: str) -> ObjectStore:
        return open_store(f"gs://{make_gcs_bucket(gcs_endpoint)}/other", endpoint_url=gcs_endpoint)


class TestAzureStore(StoreContract):
    @pytest.fixture
    def store(self, az_url: str) -> ObjectStore:
        return open_store(az_url)

    @pytest.fixture
    def store_through_faults(
        self, store: ObjectStore, azurite_connection: str
    ) -> Iterator[tuple[ObjectStore, FaultProxy]]:
        """Azurite checks each body's Content-MD5, as Azure does."""
        blob_endpoint = azurite_connection_string_parts(azurite_connection)[2]
        origin, account = blob_endpoint.rstrip("/").rsplit("/", 1)
        with through_fault_proxy(store, origin, path=f"/{account}") as pair:
            yield pair

    @pytest.fixture
    def other_store(self, az_url: str, azurite_connection: str) -> ObjectStore:
        """Another container of the same account (az_url put its connection in the env)."""
        return open_store(f"az://{make_azure_container(azurite_connection)}/other")
