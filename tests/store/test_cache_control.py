"""Every backend that stores HTTP headers sets each object's Cache-Control from its key.

An edge may keep ``v/`` (immutable) for a year and must never keep LATEST or a
status object (docs/format.md). Checked with each service's own client against
SeaweedFS (s3://), fake-gcs-server (gs://) and Azurite (az://), for a single PUT and
for a multipart upload (S3 multipart, GCS compose, Azure block lists); file://
and memory:// have no headers to set.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from tests.cloud_emulators import az_url, azurite_connection, gcs_endpoint, gs_url
from wanrl_s3.format import layout
from wanrl_s3.store import MIN_PART_BYTES, ObjectStore, open_store

__all__ = ["az_url", "azurite_connection", "gcs_endpoint", "gs_url"]  # fixtures

IMMUTABLE = "public, max-age=31536000, immutable"
KEYS = {
    "LATEST": "no-store",
    "workers/w-1.json": "no-store",
    "v/000000000001/manifest.json": IMMUTABLE,
    "v/000000000001/abc123/000000.bin": IMMUTABLE,
}
BIG_KEY = "v/000000000001/abc123/000001.bin"  # written in parts


def write_all(store: ObjectStore) -> None:
    for key in KEYS:
        store.put_bytes(key, b"{}")
    with (
        ThreadPoolExecutor(2) as pool,
        store.open_writer(BIG_KEY, pool, part_bytes=MIN_PART_BYTES) as writer,
    ):
        writer.write(bytes(2 * MIN_PART_BYTES + 1))
        writer.close()


def cache_controls(store: ObjectStore, read: Callable[[str], str | None]) -> dict[str, str | None]:
    write_all(store)
    return {key: read(key) for key in [*KEYS, BIG_KEY]}


EXPECTED = {**KEYS, BIG_KEY: IMMUTABLE}


def test_the_layout_says_which_keys_an_edge_may_keep() -> None:
    assert {key: layout.cache_control(key) for key in EXPECTED} == EXPECTED
    assert layout.cache_control("vv/x") == "no-store"  # v/ is a folder, not a name prefix


def test_s3(s3_url: str, s3_endpoint: str) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    bucket, prefix = s3_url.removeprefix("s3://").split("/", 1)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")

    def read(key: str) -> str | None:
        return client.head_object(Bucket=bucket, Key=f"{prefix}/{key}").get("CacheControl")

    assert cache_controls(store, read) == EXPECTED


def test_gcs(gs_url: str, gcs_endpoint: str) -> None:
    store = open_store(gs_url, endpoint_url=gcs_endpoint)

    def read(key: str) -> str | None:
        return store._bucket.get_blob(store._key(key)).cache_control  # type: ignore[attr-defined]

    assert cache_controls(store, read) == EXPECTED


def test_azure(az_url: str) -> None:
    store = open_store(az_url)

    def read(key: str) -> str | None:
        props = store._blob(key).get_blob_properties()  # type: ignore[attr-defined]
        return props.content_settings.cache_control

    assert cache_controls(store, read) == EXPECTED


@pytest.mark.parametrize("url", ["memory://cache-control", "file:///tmp/unused"])
def test_stores_without_headers_write_the_same_bytes(url: str, tmp_path: object) -> None:
    """file:// and memory:// keep no headers: nothing to set, and nothing breaks."""
    store = open_store(url if url.startswith("memory") else f"file://{tmp_path}/store")
    write_all(store)
    assert store.get_bytes("LATEST") == b"{}"
    assert store.head(BIG_KEY).size == 2 * MIN_PART_BYTES + 1  # type: ignore[union-attr]
