"""Tensors in and out: numpy arrays or torch tensors, as raw little-endian bytes.

The core works on numpy arrays (bf16 through ``ml_dtypes.bfloat16``). torch is
optional: a torch tensor is recognised by its type's module, never by importing
torch here, and converted on the host with one device-to-host copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ..errors import UsageError
from ..format import dtypes

TensorLike = Any  # np.ndarray or torch.Tensor; kept loose so torch stays optional
StateDict = Mapping[str, TensorLike] | Iterable[tuple[str, TensorLike]]


def is_torch(x: object) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def to_numpy(x: TensorLike, *, name: str = "tensor") -> np.ndarray:
    """A C-contiguous little-endian numpy array with the same bits as ``x``.

    Non-contiguous inputs are made contiguous (one copy); torch tensors on any
    device are copied to host memory. bf16 keeps its bits through a uint16 view.
    """
    if is_torch(x):
        return _torch_to_numpy(x, name)
    if not isinstance(x, np.ndarray):
        if np.isscalar(x):
            x = np.asarray(x)
        else:
            raise UsageError(
                f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}"
            )
    dt = dtypes.of_numpy(x.dtype)
    if x.dtype.byteorder == ">":
        raise UsageError(f"{name}: big-endian arrays are not supported; use .astype('<...')")
    if not x.flags.c_contiguous:
        x = x.copy(order="C")  # np.ascontiguousarray would turn 0-d into 1-d
    return x.view(dt.numpy)


def _torch_to_numpy(t: Any, name: str) -> np.ndarray:
    dt = dtypes.of_torch(t.dtype)
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    t = t.contiguous()
    if dt.name == "BF16":
        return t.view(torch.int16).numpy().view(dt.numpy)
    if dt.name == "BOOL":
        return t.numpy().view(np.bool_)
    return t.numpy()


def to_torch(arr: np.ndarray, device: str | None = None) -> Any:
    """A torch tensor with the same bits (shares memory on the CPU when it can)."""
    import torch

    dt = dtypes.of_numpy(arr.dtype)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    if dt.name == "BF16":
        t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(arr)
    return t if device is None else t.to(device)


def byte_view(arr: np.ndarray) -> memoryview:
    """The array's bytes without a copy (the array must be C-contiguous)."""
    flat: Any = arr.reshape(-1).view(np.uint8) if arr.size else np.empty(0, np.uint8)
    return memoryview(flat)


def iter_items(state: StateDict) -> Iterator[tuple[str, TensorLike]]:
    """(name, tensor) pairs from a mapping or from an iterable of pairs (a generator)."""
    items = state.items() if isinstance(state, Mapping) else state
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise UsageError("expected (name, tensor) pairs with string names")
        yield item
