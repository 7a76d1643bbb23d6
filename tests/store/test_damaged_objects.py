"""A ranged read from an object too short for it is damage, found at once, on every backend.

Retrying cannot lengthen an object, so a truncated one must not cost the whole
retry budget (and must not look like an unreachable store, exit 6).
"""

from __future__ import annotations

import pytest

from wanrl_s3.errors import NotFoundError, UsageError, VerificationError
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.store.retry import FakeClock, RetryPolicy


def _with_fake_clock(store: ObjectStore) -> FakeClock:
    clock = FakeClock()
    store.retry = RetryPolicy(clock=clock)
    return clock


@pytest.mark.parametrize(
    "offset, length",
    [(500, 1000), (1000, 10), (5000, 10)],
    ids=["runs-past-the-end", "starts-at-the-end", "starts-beyond-the-end"],
)
def test_a_read_past_the_end_is_a_verification_error_without_retries(
    store: ObjectStore, offset: int, length: int
) -> None:
    clock = _with_fake_clock(store)
    store.put_bytes("obj.bin", bytes(range(250)) * 4)  # 1000 bytes
    with pytest.raises(VerificationError, match=r"holds 1000 bytes.*truncated"):
        store.read_into("obj.bin", offset, memoryview(bytearray(length)))
    assert clock.sleeps == []


def test_a_read_of_a_missing_object_is_not_found(store: ObjectStore) -> None:
    clock = _with_fake_clock(store)
    with pytest.raises(NotFoundError):
        store.read_into("gone.bin", 0, memoryview(bytearray(10)))
    assert clock.sleeps == []


def test_a_read_inside_the_object_still_works(store: ObjectStore) -> None:
    data = bytes(range(250)) * 4
    store.put_bytes("obj.bin", data)
    buf = bytearray(500)
    store.read_into("obj.bin", 500, memoryview(buf))
    assert bytes(buf) == data[500:]


@pytest.mark.parametrize("bucket", ["Bad_Bucket!!", "a b", "x" * 256, "ü"])
def test_a_bucket_name_botocore_would_refuse_is_a_usage_error_before_any_io(bucket: str) -> None:
    with pytest.raises(UsageError, match="not a bucket name") as caught:
        open_store(f"s3://{bucket}/x", endpoint_url="http://127.0.0.1:9")  # nothing listens
    assert "\n" not in str(caught.value)
