"""The dtypes a snapshot may carry, named as safetensors names them.

A tensor travels as its raw little-endian bytes; the dtype name says how to
read them. ``bits`` is the unsigned integer type of the same width: the codec
compares and XORs bit patterns through it, never float values (invariant 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import UsageError


@dataclass(frozen=True)
class DType:
    name: str  # safetensors spelling, e.g. "BF16"
    numpy: np.dtype
    bits: np.dtype  # unsigned view of the same width
    torch_name: str  # attribute of the torch module, e.g. "bfloat16"

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize


def _dt(name: str, np_type: Any, bits: Any, torch_name: str) -> DType:
    return DType(
        name, np.dtype(np_type).newbyteorder("<"), np.dtype(bits).newbyteorder("<"), torch_name
    )


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _dt("BF16", ml_dtypes.bfloat16, np.uint16, "bfloat16"),
        _dt("F16", np.float16, np.uint16, "float16"),
        _dt("F32", np.float32, np.uint32, "float32"),
        _dt("F64", np.float64, np.uint64, "float64"),
        _dt("I8", np.int8, np.uint8, "int8"),
        _dt("I16", np.int16, np.uint16, "int16"),
        _dt("I32", np.int32, np.uint32, "int32"),
        _dt("I64", np.int64, np.uint64, "int64"),
        _dt("U8", np.uint8, np.uint8, "uint8"),
        _dt("BOOL", np.bool_, np.uint8, "bool"),
    )
}

_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in DTYPES.values()}
_BY_TORCH: dict[str, DType] = {d.torch_name: d for d in DTYPES.values()}


def by_name(name: str) -> DType:
    """Look a dtype up by its safetensors name; a clear error names the supported ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise UsageError(f"unsupported dtype {name!r}; supported: {', '.join(DTYPES)}") from None


def of_numpy(dtype: np.dtype) -> DType:
    key = np.dtype(dtype)
    if key.byteorder == ">" and key.itemsize > 1:
        raise UsageError(f"big-endian dtype {key} is not supported; convert to little-endian")
    key = key.newbyteorder("<") if key.itemsize > 1 else key
    try:
        return _BY_NUMPY[key]
    except KeyError:
        raise UsageError(
            f"unsupported numpy dtype {dtype}; supported: {', '.join(DTYPES)}"
        ) from None


def of_torch(dtype: object) -> DType:
    """Map a ``torch.dtype`` without importing torch (its str is ``torch.<name>``)."""
    name = str(dtype).removeprefix("torch.")
    try:
        return _BY_TORCH[name]
    except KeyError:
        raise UsageError(
            f"unsupported torch dtype {dtype}; supported: "
            + ", ".join(f"torch.{d.torch_name}" for d in DTYPES.values())
        ) from None
