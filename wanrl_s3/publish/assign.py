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

:class:`ShareSelector` is public (``wanrl_s3.ShareSelector``) so that a caller
can know a rank's share *while* its stream goes past (an adapter that copies
only its own tensors to host memory) with the very rule the publisher applies,
instead of a copy of it that could drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from ..errors import UsageError
from ..format import hashing
from ..io.tensors import TensorLike, is_torch
from ..units import require_int
from .share_record import ASSIGN_MODES, MAX_RANKS


def size_of(x: TensorLike) -> tuple[tuple[int, ...], int]:
    """A tensor's shape and size in bytes, without converting or copying it (torch or numpy)."""
    if is_torch(x):
        return tuple(x.shape), int(x.numel()) * int(x.element_size())
    arr = np.asarray(x)
    return arr.shape, int(arr.nbytes)


def check_rank(name: str, value: object, ranks: object) -> int:
    """``value`` as a rank among ``ranks`` (both checked; one line naming the field if not)."""
    count = require_int("ranks", ranks)
    if count > MAX_RANKS:
        raise UsageError(f"ranks must be at most {MAX_RANKS}, got {count}")
    rank = require_int(name, value, minimum=0)
    if rank >= count:
        raise UsageError(f"{name} must be below ranks ({count}), got {rank}")
    return rank


class ShareSelector:
    """Which rank publishes each tensor of a stream, and this rank's picks out of it.

    One selector per rank and per version (the balance starts at zero), fed the
    stream in its order. ``assign="balanced"``: every rank computes the same
    owner for every tensor from the sizes seen so far (see the module
    docstring); ``"own"``: this rank publishes every tensor it is given.

    Guarantee (balanced): a tensor's owner depends only on its byte size and
    those of the tensors before it (the stream check adds names and shapes). Of
    a tensor that is not this rank's, the selector (and so
    :class:`~wanrl_s3.ShardedPublisher`) reads only its name, shape and dtype
    (element size), never its data: a storage-less placeholder of the published
    shape and dtype (a torch ``meta`` tensor) is a valid stand-in for it.
    """

    def __init__(self, rank: int, ranks: int, assign: str = "balanced") -> None:
        if assign not in ASSIGN_MODES:
            raise UsageError(f"assign must be one of {', '.join(ASSIGN_MODES)}, got {assign!r}")
        self.rank: int = check_rank("rank", rank, ranks)
        self.ranks: int = ranks
        self.balanced: bool = assign == "balanced"
        self.loads_bytes: list[int] = [0] * ranks
        self._stream = hashing.Hasher()

    def owner(self, name: str, x: TensorLike) -> int:
        """The rank that publishes ``x`` (advances the balance: call once per tensor, in order).

        Reads ``x``'s shape and element size only (see the class docstring).
        """
        shape, size = size_of(x)
        rank = min(range(self.ranks), key=self.loads_bytes.__getitem__)
        self.loads_bytes[rank] += size
        self._stream.update(f"{name}\0{shape}\0{size}\n".encode())
        return rank

    def select(self, items: Iterable[tuple[str, TensorLike]]) -> Iterator[tuple[str, TensorLike]]:
        """The (name, tensor) pairs of ``items`` that this rank publishes, lazily, in order."""
        for name, x in items:
            if not self.balanced or self.owner(name, x) == self.rank:
                yield name, x

    def stream_hash(self) -> str | None:
        """BLAKE3 of every (name, shape, bytes) seen (balanced), to compare across ranks."""
        return self._stream.hexdigest() if self.balanced else None
