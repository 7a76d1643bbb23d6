"""Session fixtures for the GCS and Azure emulators (fake-gcs-server, Azurite).

Imported by the test modules that use them. Each skips, saying how to install
it, only when its emulator is not installed on this machine; `make test`
installs both (the ``gcs``/``azure`` extras and scripts/install-azurite.sh).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.testing.clouds import (
    azurite_binary,
    fake_gcs_server_binary,
    local_azure,
    local_gcs,
    make_azure_container,
    make_gcs_bucket,
)


def _started(module: str, extra: str, find: Callable[[], str], start: Any) -> Iterator[str]:
    """Start an emulator for the session, or skip saying what to install."""
    pytest.importorskip(module, reason=f"pip install 'wanrl-s3[{extra}]'")
    try:
        find()
    except UsageError as exc:
        pytest.skip(f"emulator not installed: {exc}")
    with start() as address:
        yield address


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """fake-gcs-server on 127.0.0.1 for the session; its URL."""
    yield from _started("google.cloud.storage", "gcs", fake_gcs_server_binary, local_gcs)


@pytest.fixture(scope="session")
def azurite_connection() -> Iterator[str]:
    """Azurite's blob service on 127.0.0.1 for the session; its connection string."""
    yield from _started("azure.storage.blob", "azure", azurite_binary, local_azure)


@pytest.fixture
def gs_url(gcs_endpoint: str) -> str:
    """A fresh bucket on the GCS emulator, as a gs:// URL with a run prefix."""
    return f"gs://{make_gcs_bucket(gcs_endpoint)}/runs/test"


@pytest.fixture
def az_url(azurite_connection: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh container on Azurite, as an az:// URL; the connection string is in the env."""
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite_connection)
    return f"az://{make_azure_container(azurite_connection)}/runs/test"
