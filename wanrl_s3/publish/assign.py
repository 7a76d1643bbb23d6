"""Which rank publishes which tensor: the same answer on every rank, with no communication.

``balanced`` (all ranks see every tensor, in the same order: verl's FSDP and
Megatron-style weight generators): greedy online balancing by bytes. Each
tensor goes to the rank with the fewest bytes so far (ties to the lowest rank),
decided as the stream goes past. Every rank runs the same arithmetic on the
same sizes, so every rank computes the same owner for every tensor without
exchanging a message; it needs no look-ahead (a generator cannot be re-read)
and its largest share is at most the mean plus one tensor. Each rank also
hashes the stream it saw (names, shapes, byte counts), so the committing rank
refuses a version whose ranks saw different streams instead of committing one
with tensors missing.

``own`` (each rank sees only its shards): a rank publishes every tensor it is
given. Nothing guarantees the shares are disjoint, so the merge refuses
duplicate names (:mod:`wanrl_s3.publish.merge`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import UsageError
from ..format import hashing
from ..io.tensors import TensorLike, is_torch
from .share_record import ASSIGN_MODES


def size_of(x: TensorLike) -> tuple[tuple[int, ...], int]:
    """A tensor's shape and size in bytes, without converting or copying it (torch or numpy)."""
    if is_torch(x):
        return tuple(x.shape), int(x.numel()) * int(x.element_size())
    arr = np.asarray(x)
    return arr.shape, int(arr.nbytes)


class ShareSelector:
    """Picks this rank's tensors out of a stream of (name, tensor) pairs."""

    def __init__(self, rank: int, ranks: int, assign: str) -> None:
        if assign not in ASSIGN_MODES:
            raise UsageError(f"assign must be one of {', '.join(ASSIGN_MODES)}, got {assign!r}")
        self.rank, self.ranks, self.balanced = rank, ranks, assign == "balanced"
        self.loads_bytes = [0] * ranks
        self._stream = hashing.Hasher()

    def owner(self, name: str, x: TensorLike) -> int:
        """The rank that publishes ``x`` (advances the balance: call once per tensor, in order)."""
        shape, size = size_of(x)
        rank = min(range(self.ranks), key=self.loads_bytes.__getitem__)
        self.loads_bytes[rank] += size
        self._stream.update(f"{name}\0{shape}\0{size}\n".encode())
        return rank

    def select(self, items: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
        for name, x in items:
            if not self.balanced or self.owner(name, x) == self.rank:
                yield name, x

    def stream_hash(self) -> str | None:
        """BLAKE3 of every (name, shape, bytes) seen (balanced), to compare across ranks."""
        return self._stream.hexdigest() if self.balanced else None
