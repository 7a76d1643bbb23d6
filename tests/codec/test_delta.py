"""Round trips of the numpy delta codec: bit-exact for every dtype, shape and change mask."""

from __future__ import annotations

from unittest import mock

import blake3
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codec.helpers import sparse_pair, versions
from wanrl_s3.codec import DeltaPayload, decode_delta, encode_delta, read_header
from wanrl_s3.codec import delta as delta_mod
from wanrl_s3.errors import UsageError, VerificationError
from wanrl_s3.format.dtypes import DTYPES, DType


@settings(max_examples=300, deadline=None)
@given(versions())
def test_round_trip_is_bit_exact(case: tuple[DType, np.ndarray, np.ndarray]) -> None:
    dt, old, new = case
    payload = encode_delta(old, new)
    assert payload is not None
    assert payload.changed == np.count_nonzero(old != new) and payload.total == old.size
    result = decode_delta(payload, old)
    assert result.dtype == old.dtype and result.shape == old.shape
    assert result.tobytes() == new.tobytes()
    assert result.view(dt.numpy).tobytes() == new.view(dt.numpy).tobytes()


@settings(max_examples=100, deadline=None)
@given(versions())
def test_in_place_and_out_give_the_same_bits(case: tuple[DType, np.ndarray, np.ndarray]) -> None:
    _, old, new = case
    payload = encode_delta(old, new)
    out = np.zeros_like(old)
    assert decode_delta(payload, old, out=out) is out
    in_place = old.copy()
    assert decode_delta(payload.data, in_place, out=in_place) is in_place
    assert out.tobytes() == in_place.tobytes() == new.tobytes()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(sorted(DTYPES)))
def test_chain_of_20_versions_from_every_join_point(seed: int, dtype_name: str) -> None:
    """Publish 20 versions as deltas; a worker joining at any version reaches the last one."""
    rng = np.random.default_rng(seed)
    bits = DTYPES[dtype_name].bits
    published = [rng.integers(0, np.iinfo(bits).max, (13, 17), dtype=bits, endpoint=True)]
    deltas = []
    for _ in range(20):
        new = published[-1].copy()
        mask = rng.random(new.shape) < rng.choice([0.0, 0.01, 0.1, 1.0])
        new[mask] ^= rng.integers(1, np.iinfo(bits).max, int(mask.sum()), dtype=bits, endpoint=True)
        deltas.append(encode_delta(published[-1], new))
        published.append(new)
    for join in range(len(published)):
        state = published[join].copy()
        for payload in deltas[join:]:
            decode_delta(payload, state, out=state)
        assert state.tobytes() == published[-1].tobytes()


def test_nan_payloads_and_signed_zeros_round_trip_bit_exact() -> None:
    old = np.array([0.0, -0.0, np.inf, 1.0, 2.0, 0.0], np.float32)
    new = np.array([-0.0, 0.0, -np.inf, np.nan, 2.0, 0.0], np.float32)
    bits = new.view(np.uint32)
    bits[3] = 0x7FC0_1234  # a NaN with a payload
    bits[5] = 0xFFA0_0001  # a negative signalling NaN
    result = decode_delta(encode_delta(old.view(np.uint32), bits), old.view(np.uint32))
    assert result.tobytes() == bits.tobytes()
    bf_old = np.array([0.0, 1.0, -0.0], ml_dtypes.bfloat16).view(np.uint16)
    bf_new = np.array([0x8000, 0x7FC1, 0xFF81], np.uint16)  # -0.0, NaN payloads
    assert decode_delta(encode_delta(bf_old, bf_new), bf_old).tobytes() == bf_new.tobytes()


def test_wrong_base_gives_different_bits_and_the_hash_catches_it() -> None:
    rng = np.random.default_rng(3)
    old, new = sparse_pair(rng, 4096, 40)
    payload = encode_delta(old, new)
    wrong = old.copy()
    wrong[7] ^= 1
    result = decode_delta(payload, wrong)
    assert result.tobytes() != new.tobytes()
    assert blake3.blake3(result.tobytes()).digest() != blake3.blake3(new.tobytes()).digest()


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (np.zeros(4095, np.uint16), "4096 elements but the base has 4095"),
        (np.zeros(4096, np.uint32), "2-byte elements but the base has 4-byte"),
    ],
)
def test_wrong_tensor_is_refused(other: np.ndarray, message: str) -> None:
    old, new = sparse_pair(np.random.default_rng(4), 4096, 40)
    with pytest.raises(VerificationError, match=message):
        decode_delta(encode_delta(old, new), other)


@pytest.mark.parametrize(("size", "changed"), [(300_000, 3), (300_000, 1), (50_000, 49_999)])
def test_extreme_rice_parameters(size: int, changed: int) -> None:
    """Very sparse deltas use k > 8 (the generic bit packer); nearly dense ones k = 0."""
    old, new = sparse_pair(np.random.default_rng(size + changed), size, changed)
    payload = encode_delta(old, new)
    head = read_header(payload.data)
    assert head.coding == delta_mod.POSITIONS_RICE
    assert (head.param > 8) if changed < 10 else (head.param == 0)
    assert decode_delta(payload, old).tobytes() == new.tobytes()


@settings(max_examples=40, deadline=None)
@given(versions(max_side=40), st.integers(1, 4))
def test_chunked_and_threaded_scan_matches(case: tuple, threads: int) -> None:
    """Tiny chunk sizes force the multi-slice, multi-thread, multi-block and chunked paths."""
    _, old, new = case
    reference = encode_delta(old, new, threads=1)
    with (
        mock.patch.object(delta_mod, "CHUNK_WORDS", 3),
        mock.patch.object(delta_mod, "PARALLEL_MIN_WORDS", 4),
        mock.patch.object(delta_mod, "SCATTER_CHUNK", 5),
        mock.patch.object(delta_mod, "APPLY_BLOCK", 7),
        mock.patch.object(delta_mod, "RICE_CHUNK", 16),
    ):
        payload = encode_delta(old, new, threads=threads)
        assert payload == reference
        assert decode_delta(payload, old).tobytes() == new.tobytes()
        in_place = old.copy()
        decode_delta(payload, in_place, out=in_place)
        assert in_place.tobytes() == new.tobytes()


def test_payload_is_near_the_entropy_bound() -> None:
    """Uniform random 1-ulp changes at 1 %: within 10 % of N*H(p) + n*H(values)."""
    rng = np.random.default_rng(5)
    old, _ = sparse_pair(rng, 2_000_000, 0)
    old &= np.uint16(0x3FFF)  # finite bf16, no all-ones mantissas that carry into the sign
    new = old.copy()
    where = rng.choice(old.size, 20_000, replace=False)
    new[where] += np.uint16(1)
    payload = encode_delta(old, new)
    xor = (old ^ new)[where]
    bound_bits = old.size * delta_mod.binary_entropy(0.01) + xor.size * delta_mod.order0_entropy(
        xor
    )
    assert len(payload.data) * 8 < 1.10 * bound_bits


def test_max_bytes_falls_back_to_raw() -> None:
    old, new = sparse_pair(np.random.default_rng(6), 10_000, 100)
    payload = encode_delta(old, new)
    assert encode_delta(old, new, max_bytes=len(payload.data)) == payload
    assert encode_delta(old, new, max_bytes=len(payload.data) - 1) is None


def test_dense_change_gives_up_before_packing() -> None:
    old, new = sparse_pair(np.random.default_rng(7), 100_000, 100_000)
    with mock.patch.object(delta_mod, "_rice_encode", side_effect=AssertionError("packed")):
        assert encode_delta(old, new, max_bytes=old.nbytes // 4) is None


def test_unchanged_tensor_is_a_bare_header() -> None:
    old = np.arange(100, dtype=np.uint16)
    payload = encode_delta(old, old.copy())
    assert payload == DeltaPayload(payload.data, 0, 100)
    assert len(payload.data) == delta_mod.HEADER_BYTES and payload.density == 0.0
    assert decode_delta(payload, old).tobytes() == old.tobytes()


def test_non_contiguous_inputs_are_read_in_c_order() -> None:
    old, new = sparse_pair(np.random.default_rng(8), 600, 30)
    old2, new2 = old.reshape(20, 30).T, new.reshape(20, 30).T
    payload = encode_delta(old2, new2)
    assert decode_delta(payload, old2).tobytes() == np.ascontiguousarray(new2).tobytes()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: encode_delta(np.zeros(3, np.float32), np.zeros(3, np.float32)), "unsigned"),
        (lambda: encode_delta(np.zeros(3, np.uint16), np.zeros(4, np.uint16)), "same shape"),
        (lambda: encode_delta(np.zeros(3, ">u2"), np.zeros(3, ">u2")), "big-endian"),
        (lambda: encode_delta(np.zeros(3, np.uint8), np.zeros(3, np.uint8), level=0), "level"),
        (lambda: encode_delta(np.zeros(3, np.uint8), np.zeros(3, np.uint8), threads=0), "threads"),
        (lambda: decode_delta(b"x" * 40, np.zeros(3, np.uint8), out=np.zeros(4, np.uint8)), "out"),
        (lambda: decode_delta("text", np.zeros(3, np.uint8)), "payload must be"),  # type: ignore[arg-type]
    ],
)
def test_misuse_is_a_usage_error(call: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        call()  # type: ignore[operator]


def test_out_must_be_contiguous() -> None:
    old = np.zeros((4, 4), np.uint16)
    payload = encode_delta(old, old + 1)
    with pytest.raises(UsageError, match="C-contiguous"):
        decode_delta(payload, old, out=np.zeros((4, 4), np.uint16).T)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(versions(max_side=64), st.integers(1, 3))
def test_long_round_trip_run(case: tuple[DType, np.ndarray, np.ndarray], threads: int) -> None:
    _, old, new = case
    payload = encode_delta(old, new, threads=threads)
    assert decode_delta(payload, old).tobytes() == new.tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("density", [0.0, 1e-6, 0.005, 0.05, 0.5, 1.0])
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_large_tensors_round_trip(density: float, dtype_name: str) -> None:
    """Several million elements: every chunking and threading boundary is crossed."""
    bits = DTYPES[dtype_name].bits
    rng = np.random.default_rng(int(density * 1e6))
    old = rng.integers(0, np.iinfo(bits).max, 3_000_001, dtype=bits, endpoint=True)
    new = old.copy()
    mask = rng.random(old.size) < density
    new[mask] ^= rng.integers(1, np.iinfo(bits).max, int(mask.sum()), dtype=bits, endpoint=True)
    payload = encode_delta(old, new)
    assert decode_delta(payload, old).tobytes() == new.tobytes()
    decode_delta(payload, old, out=old)
    assert old.tobytes() == new.tobytes()
