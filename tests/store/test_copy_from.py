"""Copying an object from another store: server-side within one S3 service, else streamed."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from wanrl_s3.store import MIN_PART_BYTES, ObjectStore, open_store
from wanrl_s3.testing import make_bucket

DATA = bytes(range(256)) * (MIN_PART_BYTES // 256 + 4096)  # a little over one part


def test_from_another_service_is_streamed_in_parts(store: ObjectStore) -> None:
    source = open_store(f"memory://{uuid.uuid4().hex}")
    source.put_bytes("v/a.bin", DATA)
    with ThreadPoolExecutor(4) as pool:
        server_side = store.copy_from(
            source, "v/a.bin", "v/b.bin", size=len(DATA), executor=pool, part_bytes=MIN_PART_BYTES
        )
    assert not server_side and store.get_bytes("v/b.bin") == DATA
    assert store.pending_uploads() == []


def test_between_buckets_of_one_s3_service_is_server_side(s3_url: str, s3_endpoint: str) -> None:
    source = open_store(s3_url, endpoint_url=s3_endpoint)
    bucket = make_bucket(s3_endpoint, f"wanrl-{uuid.uuid4().hex[:12]}")
    dest = open_store(f"s3://{bucket}/other/prefix", endpoint_url=s3_endpoint)
    source.put_bytes("v/a.bin", DATA)
    source.put_bytes("v/empty.bin", b"")
    with ThreadPoolExecutor(2) as pool:
        assert dest.copy_from(
            source, "v/a.bin", "v/a.bin", size=len(DATA), executor=pool, part_bytes=MIN_PART_BYTES
        )
        assert dest.copy_from(
            source, "v/empty.bin", "v/empty.bin", size=0, executor=pool, part_bytes=MIN_PART_BYTES
        )
    assert dest.get_bytes("v/a.bin") == DATA and dest.get_bytes("v/empty.bin") == b""
