"""Which tensors this rank copies to host memory when every rank publishes a share.

Trainers that gather every full tensor on every rank, in the same order (FSDP
and Megatron-style weight generators), publish through a ``ShardedPublisher``
in ``balanced`` mode: each rank's share is picked out of that stream. The host
copy has to know the share *while* the stream goes past (a generator cannot be
re-read, and copying everything would cost every rank a whole model of host
memory), but the publisher decides it only later, on the background thread. So
:class:`BalancedShare` asks the publisher's own rule (its
:meth:`~wanrl_s3.VersionPublisher.share_selector`) as the stream goes past, on
the tensors as they will be published (the published dtype's sizes), and the
copy keeps only this rank's tensors. The others are handed to the publisher as
storage-less placeholders of the right shape and dtype (torch ``meta`` tensors,
or zero-stride numpy views): in balanced mode the publisher reads only the name,
shape and dtype of another rank's tensor, so it sees the whole stream (its stream
check across ranks holds), picks the same share, and never reads a placeholder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..io.tensors import TensorLike, is_torch

if TYPE_CHECKING:
    from ..publish.assign import ShareSelector


class BalancedShare:
    """The balanced assignment, decided tensor by tensor as the stream goes past."""

    def __init__(self, selector: ShareSelector) -> None:
        self.selector = selector

    def other(self, name: str, x: TensorLike, dtype: Any) -> TensorLike | None:
        """None if the stream's next tensor (published as ``dtype``) is this rank's, else
        a placeholder for it: its shape and published dtype, no storage."""
        stand_in = placeholder(x, dtype)
        if self.selector.owner(name, stand_in) == self.selector.rank:
            return None
        return stand_in


def placeholder(x: TensorLike, dtype: Any) -> TensorLike:
    """A tensor of ``x``'s shape in ``dtype`` that holds no data."""
    if is_torch(x):
        import torch

        return torch.empty(x.shape, dtype=dtype, device="meta")
    return np.broadcast_to(np.zeros((), dtype=dtype), x.shape)
