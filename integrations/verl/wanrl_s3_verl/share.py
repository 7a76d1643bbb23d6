"""Which of verl's tensors this rank copies to host memory when every rank publishes.

verl's FSDP and Megatron weight generators yield every full tensor, in the same
order, on every trainer rank (each one an all-gather or broadcast all ranks join),
so a rank's share is picked out of that stream by ``ShardedPublisher``'s
``balanced`` assignment: each tensor goes to the rank with the fewest bytes so far
(ties to the lowest rank). The host copy has to know the share *while* the
generator runs (it cannot be re-read, and copying everything would cost every rank
a whole model of host memory), but the core decides it only later, on the
background thread. So :class:`BalancedShare` replays the core's rule on the same
sizes (the published dtype's), and the copy keeps only this rank's tensors. The
others are handed to the publisher as storage-less ``meta`` tensors of the right
shape and dtype: the core sees the whole stream (its stream check across ranks
holds), picks the same share, and never reads a placeholder. If the two rules
ever diverged, the core would pick a placeholder, fail reading it and abort the
version on every rank: loud, nothing visible (and a test checks they agree).
"""

from __future__ import annotations

import torch


class BalancedShare:
    """The balanced assignment, decided tensor by tensor as verl's stream goes past."""

    def __init__(self, rank: int, ranks: int) -> None:
        self.rank = rank
        self.loads_bytes = [0] * ranks

    def mine(self, nbytes: int) -> bool:
        """Whether the next tensor of the stream (``nbytes`` as published) is this rank's."""
        owner = min(range(len(self.loads_bytes)), key=self.loads_bytes.__getitem__)
        self.loads_bytes[owner] += nbytes
        return owner == self.rank

    def other(self, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """None if the stream's next tensor (published as ``dtype``) is this rank's, else
        a placeholder for it: its shape and published dtype, no storage."""
        if self.mine(tensor.numel() * dtype.itemsize):
            return None
        return torch.empty(tensor.shape, dtype=dtype, device="meta")
