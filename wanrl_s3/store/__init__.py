"""Object stores: one small protocol, with s3://, file:// and memory:// implementations."""

from .registry import get_store_class, known_implementations, open_store, register_implementation
from .retry import SYSTEM_CLOCK, Clock, FakeClock, RetryPolicy, SystemClock
from .spec import (
    MIN_PART_BYTES,
    Blob,
    ObjectInfo,
    ObjectStore,
    ObjectWriter,
    PendingUpload,
    check_key,
    compare_and_swap,
    get_or_none,
)

__all__ = [
    "MIN_PART_BYTES",
    "SYSTEM_CLOCK",
    "Blob",
    "Clock",
    "FakeClock",
    "ObjectInfo",
    "ObjectStore",
    "ObjectWriter",
    "PendingUpload",
    "RetryPolicy",
    "SystemClock",
    "check_key",
    "compare_and_swap",
    "get_or_none",
    "get_store_class",
    "known_implementations",
    "open_store",
    "register_implementation",
]
