"""Object stores: one small protocol (an ABC), with s3://, gs://, az://, file:// and memory://.

For backend authors: subclass :class:`ObjectStore`, register the scheme with
:func:`register_implementation`, and run :class:`wanrl_s3.testing.StoreContract`.
A service that keeps HTTP headers writes each object with :func:`cache_control`
of its key, so a CDN caches versions and never LATEST.
"""

from ..format.layout import cache_control
from .registry import (
    accepted_options,
    get_store_class,
    known_implementations,
    open_store,
    register_implementation,
)
from .retry import SYSTEM_CLOCK, Clock, FakeClock, RetryPolicy, SystemClock
from .spec import (
    MIN_PART_BYTES,
    Blob,
    ObjectInfo,
    ObjectStore,
    ObjectWriter,
    PartSlots,
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
    "PartSlots",
    "PendingUpload",
    "RetryPolicy",
    "SystemClock",
    "accepted_options",
    "cache_control",
    "check_key",
    "compare_and_swap",
    "get_or_none",
    "get_store_class",
    "known_implementations",
    "open_store",
    "register_implementation",
]


def __dir__() -> list[str]:
    return sorted(__all__)  # the public names only, not the submodules
