"""Which of verl's tensors this rank copies to host memory when every rank publishes.

verl's FSDP and Megatron weight generators yield every full tensor, in the same
order, on every trainer rank (each one an all-gather or broadcast all ranks join),
so a rank's share is picked out of that stream by ``ShardedPublisher``'s
``balanced`` assignment. The host copy has to know the share *while* the
generator runs (it cannot be re-read, and copying everything would cost every rank
a whole model of host memory), but the publisher decides it only later, on the
background thread. So :class:`BalancedShare` asks the core's own rule
(:class:`wanrl_s3.ShareSelector`) as the stream goes past, on the tensors as they
will be published (the published dtype's sizes), and the copy keeps only this
rank's tensors. The others are handed to the publisher as storage-less ``meta``
tensors of the right shape and dtype: the core guarantees that in balanced mode it
reads only the name, shape and dtype of another rank's tensor, so it sees the whole
stream (its stream check across ranks holds), picks the same share, and never
reads a placeholder.
"""

from __future__ import annotations

import torch

from wanrl_s3 import ShareSelector


class BalancedShare:
    """The balanced assignment, decided tensor by tensor as verl's stream goes past."""

    def __init__(self, rank: int, ranks: int) -> None:
        self.selector = ShareSelector(rank, ranks, "balanced")

    def other(self, name: str, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """None if the stream's next tensor (published as ``dtype``) is this rank's, else
        a placeholder for it: its shape and published dtype, no storage."""
        placeholder = torch.empty(tensor.shape, dtype=dtype, device="meta")
        if self.selector.owner(name, placeholder) == self.selector.rank:
            return None
        return placeholder
