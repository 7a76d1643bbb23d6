"""The weights of one submit, copied into host buffers that outlive it.

A background publication reads the weights long after the caller's submit has
returned, and the trainer keeps training: it needs a copy the trainer cannot
mutate. Allocating one per publication would hold (and page-fault) a fresh host
copy of the model every time, so the buffers are kept and overwritten in place:
host memory stays one copy of the published weights, whatever the number of
publications. The caller overwrites them only once the previous publication has
finished. Buffers of CUDA tensors are pinned, so the device-to-host copy runs at
full speed.

torch tensors and numpy arrays are both taken; torch is imported only when the
weights are torch tensors. When this rank publishes a share of a stream every rank
sees whole (:mod:`.share`), only the share's tensors are copied: host memory is
the share, not the model; the others go on as storage-less placeholders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..errors import UsageError
from ..io.tensors import TensorLike, is_torch
from .share import BalancedShare

#: What floating tensors are published as: "bf16", or "keep" (their own dtype).
PUBLISH_DTYPES = ("bf16", "keep")
Named = Iterable[tuple[str, TensorLike]]


def check_publish_dtype(dtype: object) -> str:
    if dtype not in PUBLISH_DTYPES:
        raise UsageError(f"dtype must be one of {', '.join(PUBLISH_DTYPES)}, got {dtype!r}")
    return str(dtype)


def published_dtype(name: str, x: TensorLike, dtype: str) -> Any:
    """The dtype ``x`` is published in: floating ones in bf16 unless ``dtype`` is "keep"."""
    if is_torch(x):
        if dtype == "bf16" and x.is_floating_point():
            import torch

            return torch.bfloat16
        return x.dtype
    if not isinstance(x, np.ndarray):
        raise UsageError(f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}")
    if dtype == "bf16" and x.dtype.kind == "f":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return x.dtype


def cast_stream(
    weights: Named, dtype: str, share: BalancedShare | None = None
) -> Iterator[tuple[str, TensorLike]]:
    """The tensors in their published dtype, cast as they go past (no copy is kept).

    With ``share``, other ranks' tensors are neither cast nor kept: placeholders.
    """
    for name, x in weights:
        target = published_dtype(name, x, dtype)
        other = None if share is None else share.other(name, x, target)
        if other is not None:
            yield name, other
        elif x.dtype == target:
            yield name, x
        else:
            yield name, x.to(target) if is_torch(x) else x.astype(target)


class HostBuffers:
    """Reusable host copies of a trainer's tensors, cast to their published dtype."""

    def __init__(self, dtype: str) -> None:
        self.dtype = check_publish_dtype(dtype)
        self.buffers: dict[str, TensorLike] = {}

    @property
    def nbytes(self) -> int:
        return sum(_nbytes(b) for b in self.buffers.values())

    def fill(self, weights: Named, share: BalancedShare | None = None) -> dict[str, TensorLike]:
        """Copy ``weights`` in, reusing each name's buffer when its kind, shape and dtype fit.

        Names no longer given are dropped. The returned mapping is the buffers
        themselves, in the given order: valid until the next ``fill``. With ``share``,
        only this rank's tensors are copied; the others appear as placeholders.
        """
        stream: dict[str, TensorLike] = {}
        filled: dict[str, TensorLike] = {}
        for name, x in weights:
            target = published_dtype(name, x, self.dtype)
            other = None if share is None else share.other(name, x, target)
            if other is not None:
                stream[name] = other
                continue
            buf = self._buffer(name, x, target)
            if is_torch(buf):
                buf.copy_(x)  # one pass: the cast to bf16 and the device-to-host copy
            else:
                np.copyto(buf, x, casting="unsafe")  # unsafe: the cast to bf16 is wanted
            stream[name] = filled[name] = buf
        self.buffers = filled
        return stream

    def _buffer(self, name: str, x: TensorLike, target: Any) -> TensorLike:
        buf = self.buffers.get(name)
        if buf is not None and _fits(buf, x, target):
            return buf
        if not is_torch(x):
            return np.empty(x.shape, dtype=target)
        import torch

        pin = x.is_cuda and torch.cuda.is_available()
        return torch.empty(x.shape, dtype=target, device="cpu", pin_memory=pin)


def _fits(buf: TensorLike, x: TensorLike, target: Any) -> bool:
    """Whether ``buf`` can take ``x`` cast to ``target``: same kind, shape and dtype."""
    same_kind = is_torch(buf) == is_torch(x)
    return same_kind and tuple(buf.shape) == tuple(x.shape) and buf.dtype == target


def _nbytes(x: TensorLike) -> int:
    return int(x.numel()) * int(x.element_size()) if is_torch(x) else int(x.nbytes)
