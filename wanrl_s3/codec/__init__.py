"""Codecs: bit-exact sparse deltas between versions of a tensor, and whole tensors
stored losslessly in fewer bytes (byte planes, docs/full-format.md).

``binary_entropy`` and ``order0_entropy`` give the entropy bound a delta payload
is measured against (positions ``N*H(n/N)`` bits, values the order-0 entropy of
the XOR words; docs/delta-format.md): the encoder itself uses them to give up
on dense changes, and benchmarks report how far above the bound it lands.

The numpy functions import with the core. The torch ones (``encode_delta_torch``,
``decode_delta_torch``) are loaded on first use, so importing this package never
imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .delta import (
    DeltaHeader,
    DeltaPayload,
    binary_entropy,
    decode_delta,
    encode_delta,
    order0_entropy,
    read_header,
)
from .full import (
    CODING_PLANES,
    CODING_RAW,
    FullHeader,
    FullPayload,
    decode_full,
    encode_full,
    read_full_header,
)

if TYPE_CHECKING:
    from .torch_delta import decode_delta_torch, encode_delta_torch

_LAZY = {"encode_delta_torch", "decode_delta_torch"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import torch_delta

        return getattr(torch_delta, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CODING_PLANES",
    "CODING_RAW",
    "DeltaHeader",
    "DeltaPayload",
    "FullHeader",
    "FullPayload",
    "binary_entropy",
    "decode_delta",
    "decode_delta_torch",
    "decode_full",
    "encode_delta",
    "encode_delta_torch",
    "encode_full",
    "order0_entropy",
    "read_full_header",
    "read_header",
]
