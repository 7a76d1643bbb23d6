"""The weights of one sync, copied into host buffers that outlive it.

A background publication reads the weights long after verl's generator has moved
on, and the trainer keeps training: it needs a copy the trainer cannot mutate.
Allocating one per publication would hold (and page-fault) a fresh host copy of
the model every sync, so the buffers are kept and overwritten in place: host
memory stays one copy of the published weights, whatever the number of syncs.
The caller overwrites them only once the previous publication has finished.
Buffers of CUDA tensors are pinned, so the device-to-host copy runs at full speed.

When every rank publishes its share (``publish_ranks: all``), a rank copies only
the tensors of its share (:mod:`.share`): its host memory is its share, not the
model; the other tensors go on as storage-less placeholders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from .share import BalancedShare

Named = Iterable[tuple[str, torch.Tensor]]


def published_dtype(tensor: torch.Tensor, dtype: str) -> torch.dtype:
    """The dtype a tensor is published in: floating ones in bf16 unless ``dtype`` is "keep"."""
    if dtype == "bf16" and tensor.is_floating_point():
        return torch.bfloat16
    return tensor.dtype


def cast_floating(
    weights: Named, dtype: str, share: BalancedShare | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """verl's tensors in their published dtype (the synchronous path: no copy kept).

    With ``share``, other ranks' tensors are neither cast nor kept: placeholders.
    """
    for name, tensor in weights:
        target = published_dtype(tensor, dtype)
        other = None if share is None else share.other(name, tensor, target)
        if other is not None:
            yield name, other
        else:
            yield name, tensor if tensor.dtype == target else tensor.to(target)


class HostBuffers:
    """Reusable host copies of verl's per-tensor weights, cast to their published dtype."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.buffers: dict[str, torch.Tensor] = {}

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers.values())

    def fill(self, weights: Named, share: BalancedShare | None = None) -> dict[str, torch.Tensor]:
        """Copy ``weights`` in, reusing each name's buffer when its shape and dtype still fit.

        Names verl no longer sends are dropped. The returned mapping is the buffers
        themselves, in verl's order: valid until the next ``fill``. With ``share``,
        only this rank's tensors are copied; the others appear as placeholders.
        """
        stream: dict[str, torch.Tensor] = {}
        filled: dict[str, torch.Tensor] = {}
        for name, tensor in weights:
            target = published_dtype(tensor, self.dtype)
            other = None if share is None else share.other(name, tensor, target)
            if other is not None:
                stream[name] = other
                continue
            buf = self._buffer(name, tensor, target)
            buf.copy_(tensor)  # one pass: the cast to bf16 and the device-to-host copy
            stream[name] = filled[name] = buf
        self.buffers = filled
        return stream

    def _buffer(self, name: str, tensor: torch.Tensor, target: torch.dtype) -> torch.Tensor:
        buf = self.buffers.get(name)
        if buf is not None and buf.shape == tensor.shape and buf.dtype == target:
            return buf
        pin = tensor.is_cuda and torch.cuda.is_available()
        return torch.empty(tensor.shape, dtype=target, device="cpu", pin_memory=pin)
