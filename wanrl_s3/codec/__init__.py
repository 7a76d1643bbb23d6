"""Codecs: bit-exact sparse deltas between versions of a tensor, and whole tensors
stored losslessly in fewer bytes (byte planes, docs/full-format.md).

``binary_entropy`` and ``order0_entropy`` give the entropy bound a delta payload
is measured against (positions ``N*H(n/N)`` bits, values the order-0 entropy of
the XOR words; docs/delta-format.md): the encoder itself uses them to give up
on dense changes, and benchmarks report how far above the bound it lands.

Every name is imported on first use, from the one table ``_PUBLIC``: importing
this package never imports torch (``encode_delta_torch``, ``decode_delta_torch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import attach

# public name -> the private module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    "DeltaHeader": ".delta",
    "DeltaPayload": ".delta",
    "binary_entropy": ".delta",
    "decode_delta": ".delta",
    "encode_delta": ".delta",
    "order0_entropy": ".delta",
    "read_header": ".delta",
    "CODING_PLANES": ".full",
    "CODING_RAW": ".full",
    "FullHeader": ".full",
    "FullPayload": ".full",
    "decode_full": ".full",
    "encode_full": ".full",
    "read_full_header": ".full",
    "encode_delta_torch": ".torch_delta",
    "decode_delta_torch": ".torch_delta",
}

if TYPE_CHECKING:
    from .delta import DeltaHeader as DeltaHeader
    from .delta import DeltaPayload as DeltaPayload
    from .delta import binary_entropy as binary_entropy
    from .delta import decode_delta as decode_delta
    from .delta import encode_delta as encode_delta
    from .delta import order0_entropy as order0_entropy
    from .delta import read_header as read_header
    from .full import CODING_PLANES as CODING_PLANES
    from .full import CODING_RAW as CODING_RAW
    from .full import FullHeader as FullHeader
    from .full import FullPayload as FullPayload
    from .full import decode_full as decode_full
    from .full import encode_full as encode_full
    from .full import read_full_header as read_full_header
    from .torch_delta import decode_delta_torch as decode_delta_torch
    from .torch_delta import encode_delta_torch as encode_delta_torch
else:  # hidden from type checkers, so that a misspelt name is an error there
    __getattr__, __dir__, __all__ = attach(__name__, _PUBLIC)
