"""The weights of one sync, copied into host buffers that outlive it.

A background publication reads the weights long after verl's generator has moved
on, and the trainer keeps training: it needs a copy the trainer cannot mutate.
Allocating one per publication would hold (and page-fault) a fresh host copy of
the model every sync, so the buffers are kept and overwritten in place: host
memory stays one copy of the published weights, whatever the number of syncs.
The caller overwrites them only once the previous publication has finished.
Buffers of CUDA tensors are pinned, so the device-to-host copy runs at full speed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

Named = Iterable[tuple[str, torch.Tensor]]


def published_dtype(tensor: torch.Tensor, dtype: str) -> torch.dtype:
    """The dtype a tensor is published in: floating ones in bf16 unless ``dtype`` is "keep"."""
    if dtype == "bf16" and tensor.is_floating_point():
        return torch.bfloat16
    return tensor.dtype


def cast_floating(weights: Named, dtype: str) -> Iterator[tuple[str, torch.Tensor]]:
    """verl's tensors in their published dtype (the synchronous path: no copy kept)."""
    for name, tensor in weights:
        target = published_dtype(tensor, dtype)
        yield name, tensor if tensor.dtype == target else tensor.to(target)


class HostBuffers:
    """Reusable host copies of verl's per-tensor weights, cast to their published dtype."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.buffers: dict[str, torch.Tensor] = {}

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers.values())

    def fill(self, weights: Named) -> dict[str, torch.Tensor]:
        """Copy ``weights`` in, reusing each name's buffer when its shape and dtype still fit.

        Names verl no longer sends are dropped. The returned mapping is the buffers
        themselves, in verl's order: valid until the next ``fill``.
        """
        filled: dict[str, torch.Tensor] = {}
        for name, tensor in weights:
            buf = self._buffer(name, tensor)
            buf.copy_(tensor)  # one pass: the cast to bf16 and the device-to-host copy
            filled[name] = buf
        self.buffers = filled
        return filled

    def _buffer(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        target = published_dtype(tensor, self.dtype)
        buf = self.buffers.get(name)
        if buf is not None and buf.shape == tensor.shape and buf.dtype == target:
            return buf
        pin = tensor.is_cuda and torch.cuda.is_available()
        return torch.empty(tensor.shape, dtype=target, device="cpu", pin_memory=pin)
