"""Give freed download buffers back to the system (glibc), instead of keeping them.

By default glibc raises its mmap threshold as big blocks are freed (up to 32 MiB), and
from then on the download threads' response bodies (8 MiB each) come from per-thread
arenas that keep the memory after use. Measured (docs/results/memory.md): a 1 GiB delta
publish kept 50-60 MiB more resident, and a rollout engine holding its snapshot in
memory about 130 MiB (1.27x of the snapshot instead of 1.13x).

:func:`return_big_buffers` has glibc map every allocation of ``threshold_bytes`` or more
on its own, so that freeing it unmaps it. It is process-wide: each such allocation then
costs a map and its first-touch page faults, which is why the product's own commands
call it and a library caller (the verl engine) decides.
"""

from __future__ import annotations

import ctypes

from ..units import MiB

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
BIG_BUFFER_BYTES = MiB


def return_big_buffers(threshold_bytes: int = BIG_BUFFER_BYTES) -> bool:
    """Map allocations of ``threshold_bytes`` or more on their own; True if glibc took it
    (False on other C libraries, which are left as they are)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, int(threshold_bytes)))
