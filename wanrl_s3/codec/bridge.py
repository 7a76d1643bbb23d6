"""The one place where tensors meet the delta codec.

The codec (:mod:`wanrl_s3.codec`) works on flat arrays of bit patterns. The
publisher and the subscriber work on typed tensors (numpy, or torch on any
device). This module converts between the two so that neither caller repeats
it: views as the same-width unsigned type, the torch path for tensors that
live on an accelerator, and in-place application.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import codec as _codec
from ..format import dtypes, hashing
from ..io.tensors import byte_view, is_torch, to_numpy, to_torch
from .delta import DeltaPayload


def _bits(arr: np.ndarray) -> np.ndarray:
    return arr.reshape(-1).view(dtypes.of_numpy(arr.dtype).bits)


def encode_delta(
    old: np.ndarray, x: Any, *, level: int, max_bytes: int, update: bool
) -> tuple[DeltaPayload | None, str]:
    """Encode ``x`` against ``old``; with ``update``, ``old`` then holds ``x``'s bits.

    Returns the payload (None when the change is too dense for ``max_bytes``,
    leaving ``old`` untouched) and the BLAKE3 hash of the new bits. A tensor on
    an accelerator is compared on its device, so only the changes cross to the
    host when ``old`` is kept up to date.
    """
    if is_torch(x) and x.device.type != "cpu" and update:
        from .torch_delta import encode_delta_torch

        payload = encode_delta_torch(
            to_torch(old, str(x.device)), x, level=level, max_bytes=max_bytes
        )
        if payload is None:
            return None, ""
        apply_delta(payload.data, old)
        return payload, hashing.digest(byte_view(old))
    new = to_numpy(x)
    payload = _codec.encode_delta(_bits(old), _bits(new), level=level, max_bytes=max_bytes)
    if payload is None:
        return None, ""
    if update:
        np.copyto(old, new)
    return payload, hashing.digest(byte_view(new))


def apply_delta(
    data: bytes | bytearray | memoryview, dest: np.ndarray, *, base: np.ndarray | None = None
) -> None:
    """``dest`` = ``base`` (default: ``dest`` itself) XOR a delta payload, bit-exact.

    Raises VerificationError if the payload is malformed. ``base`` must match
    ``dest``'s shape and dtype; decoding from it saves a copy into ``dest`` first.
    """
    bits = _bits(dest)
    _codec.decode_delta(data, bits if base is None else _bits(base), out=bits)
