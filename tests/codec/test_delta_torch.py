"""The torch path: same bytes as the numpy path, applied on the tensor's device."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings

from tests.codec.helpers import sparse_pair, versions
from wanrl_s3.codec import decode_delta, encode_delta
from wanrl_s3.errors import UsageError, VerificationError
from wanrl_s3.format.dtypes import DTYPES, DType

torch = pytest.importorskip("torch")
from wanrl_s3.codec import decode_delta_torch, encode_delta_torch  # noqa: E402

SIGNED = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def to_torch(bits: np.ndarray, dt: DType) -> torch.Tensor:
    """The tensor whose bit pattern is ``bits`` (numpy has no bf16 torch bridge)."""
    raw = torch.from_numpy(np.ascontiguousarray(bits).view(SIGNED[dt.itemsize]).copy())
    return raw.view(getattr(torch, dt.torch_name))


def bits_of(tensor: torch.Tensor) -> bytes:
    width = tensor.element_size()
    return (
        tensor.contiguous()
        .view(getattr(torch, "uint8" if width == 1 else f"int{8 * width}"))
        .numpy()
        .tobytes()
    )


@settings(max_examples=150, deadline=None)
@given(versions())
def test_torch_and_numpy_write_identical_bytes_and_agree(
    case: tuple[DType, np.ndarray, np.ndarray],
) -> None:
    dt, old, new = case
    told, tnew = to_torch(old, dt), to_torch(new, dt)
    payload = encode_delta_torch(told, tnew)
    assert payload == encode_delta(old, new)
    result = decode_delta_torch(payload, told)
    assert result.dtype == told.dtype and result.shape == told.shape
    assert bits_of(result) == new.tobytes() == decode_delta(payload, old).tobytes()
    assert bits_of(told) == old.tobytes()  # the base is untouched


def test_in_place_and_out_tensor() -> None:
    old, new = sparse_pair(np.random.default_rng(1), 3000, 30)
    dt = DTYPES["BF16"]
    base = to_torch(old, dt).reshape(30, 100)
    payload = encode_delta(old, new)
    out = torch.zeros_like(base)
    assert decode_delta_torch(payload, base, out=out) is out
    assert decode_delta_torch(payload.data, base, out=base) is base
    assert bits_of(out) == bits_of(base) == new.tobytes()


def test_nan_and_negative_zero_round_trip_bit_exact() -> None:
    old = torch.tensor([0.0, -0.0, 1.0, float("inf")], dtype=torch.float32)
    new = torch.tensor([-0.0, 0.0, float("nan"), -float("inf")], dtype=torch.float32)
    new.view(torch.int32)[2] = 0x7FC0_0ABC  # NaN with a payload
    assert bits_of(decode_delta_torch(encode_delta_torch(old, new), old)) == bits_of(new)


def test_non_contiguous_tensors_encode_in_c_order() -> None:
    old = torch.randn(20, 30).to(torch.bfloat16)
    new = old.clone()
    new[3, 4] = 7.0
    payload = encode_delta_torch(old.T, new.T)
    assert torch.equal(decode_delta_torch(payload, old.T.contiguous()), new.T.contiguous())


def test_wrong_base_is_refused_or_differs() -> None:
    old = torch.randn(50).to(torch.bfloat16)
    new = old.clone()
    new[7] = 3.0
    payload = encode_delta_torch(old, new)
    with pytest.raises(VerificationError, match="50 elements but the base has 49"):
        decode_delta_torch(payload, old[:49])
    wrong = old.clone()
    wrong[8] = -1.0
    assert not torch.equal(decode_delta_torch(payload, wrong), new)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: encode_delta_torch(torch.zeros(3), torch.zeros(4)), "same shape"),
        (lambda: encode_delta_torch(torch.zeros(3), torch.zeros(3, dtype=torch.float64)), "dtype"),
        (
            lambda: encode_delta_torch(
                torch.zeros(3, dtype=torch.complex64), torch.zeros(3, dtype=torch.complex64)
            ),
            "unsupported",
        ),
        (lambda: decode_delta_torch(b"", torch.zeros(3), out=torch.zeros(2)), "must match"),
        (lambda: decode_delta_torch(b"", torch.zeros(3, 2), out=torch.zeros(2, 3).T), "contiguous"),
    ],
)
def test_misuse_is_a_usage_error(call: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        call()  # type: ignore[operator]


def test_the_codec_imports_without_torch() -> None:
    """``import wanrl_s3.codec`` must not import torch (the core never needs it)."""
    code = "import sys, wanrl_s3.codec; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
