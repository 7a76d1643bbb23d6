"""The full-tensor codec: bit-exact round trips, raw fallback, the spec's reader, bad input."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codec import full_reference as reference
from tests.codec.helpers import versions
from wanrl_s3.codec.full import (
    BLOCK_ELEMENTS,
    CODING_PLANES,
    CODING_RAW,
    DTYPE_IDS,
    HEADER_BYTES,
    block_size,
    decode_full,
    encode_full,
    read_full_header,
)
from wanrl_s3.errors import UsageError, VerificationError
from wanrl_s3.format.dtypes import DTYPES, DType

FLOATS = {"BF16": (8, 7), "F16": (5, 10), "F32": (8, 23), "F64": (11, 52)}  # exponent, mantissa


def typical(dt: DType, count: int, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Bits of values like a model's: Gaussian floats of one scale, small ints, sparse bools."""
    if dt.name in FLOATS:
        values = rng.standard_normal(count) * scale
        return values.astype(dt.numpy).view(dt.bits)
    if dt.name == "BOOL":
        return (rng.random(count) < 0.05).view(np.uint8)
    return rng.integers(-50, 50, count).astype(dt.numpy).view(dt.bits)


def special_bits(dt: DType) -> st.SearchStrategy[int]:
    """Zeros of both signs, denormals, infinities and NaNs with any payload; any int."""
    if dt.name not in FLOATS:
        return st.integers(0, 1) if dt.name == "BOOL" else st.integers(0, np.iinfo(dt.bits).max)
    exp_bits, man_bits = FLOATS[dt.name]
    return st.builds(
        lambda sign, exp, man: (sign << (exp_bits + man_bits)) | (exp << man_bits) | man,
        st.integers(0, 1),
        st.sampled_from([0, (1 << exp_bits) - 1]),
        st.integers(0, (1 << man_bits) - 1),
    )


@st.composite
def tensors(draw: st.DrawFn) -> tuple[DType, np.ndarray, int]:
    """(dtype, bits, block size): typical values of one scale with specials written over them."""
    dt = DTYPES[draw(st.sampled_from(sorted(DTYPES)))]
    count = draw(st.integers(1, 20_000))
    scale = draw(st.sampled_from([1e-30, 1e-3, 0.02, 1.0, 300.0]))
    bits = typical(dt, count, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), scale)
    for index, value in draw(st.lists(st.tuples(st.integers(0, count - 1), special_bits(dt)))):
        bits[index] = value
    return dt, bits, draw(st.sampled_from([3, 1000, 4096, BLOCK_ELEMENTS]))


def round_trip(bits: np.ndarray, dt: DType, **kwargs: int) -> bytes:
    """Encode, decode with the codec and with the reference; both must give the bits back."""
    payload = encode_full(bits, dt.name, **kwargs)
    out = np.empty(bits.shape, dt.bits)
    assert decode_full(payload, out, dtype=dt.name) is out
    assert out.tobytes() == bits.tobytes()
    assert reference.decode(bytes(payload.data)) == (dt.name, bits.size, bits.tobytes())
    return bytes(payload.data)


@settings(max_examples=60, deadline=None)
@given(tensors())
def test_typical_tensors_with_specials_round_trip_bit_exact(case: tuple) -> None:
    dt, bits, block = case
    round_trip(bits, dt, block_elements=block)


@settings(max_examples=60, deadline=None)
@given(versions(max_side=40))
def test_any_bit_patterns_of_any_shape_round_trip(case: tuple) -> None:
    dt, old, new = case
    round_trip(old, dt)
    round_trip(new, dt, block_elements=5)


@pytest.mark.parametrize(
    ("name", "most"), [("BF16", 0.70), ("F16", 0.90), ("F32", 0.90), ("F64", 0.95)]
)
def test_float_weights_are_coded_by_planes_and_shrink(name: str, most: float) -> None:
    dt = DTYPES[name]
    bits = typical(dt, 600_000, np.random.default_rng(1), 0.02)
    payload = encode_full(bits, name)
    assert payload.coding == CODING_PLANES
    assert payload.ratio <= most
    head = read_full_header(payload.data)
    assert (head.blocks, head.block_elements) == (4, 150_000)  # 3 of 2^18 rounded up to even
    round_trip(bits, dt)


@pytest.mark.parametrize(
    ("count", "blocks"),
    [(1, 1), (131_071, 1), (131_072, 2), (409_600, 2), (600_000, 4), (1_638_400, 8),
     (4_423_680, 18), (BLOCK_ELEMENTS * 2, 2)],
)  # fmt: skip
def test_default_blocks_are_equal_and_even_when_several(count: int, blocks: int) -> None:
    block = block_size(count)
    assert block <= BLOCK_ELEMENTS and -(-count // block) == blocks
    sizes = [min(block, count - b * block) for b in range(blocks)]
    assert max(sizes) - min(sizes) <= blocks  # equal but for rounding


def test_bf16_array_and_its_bit_view_give_the_same_payload() -> None:
    weights = (np.random.default_rng(2).standard_normal(10_000) * 0.02).astype(ml_dtypes.bfloat16)
    assert encode_full(weights, "BF16").data == encode_full(weights.view(np.uint16), "BF16").data


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("U8", np.random.default_rng(3).integers(0, 256, 50_000, dtype=np.uint8)),  # random bytes
        ("I8", np.random.default_rng(4).integers(-128, 128, 50_000).astype(np.int8)),
        ("BF16", np.random.default_rng(5).integers(0, 2**16, 50_000, dtype=np.uint16)),
        ("BF16", typical(DTYPES["BF16"], 2047, np.random.default_rng(6), 0.02)),  # < 4 KiB
        ("F32", np.zeros(0, np.float32)),
        ("F64", np.array(-0.0)),
    ],
)
def test_what_does_not_pay_is_stored_raw(name: str, bits: np.ndarray) -> None:
    payload = encode_full(bits, name)
    assert payload.coding == CODING_RAW
    assert len(payload.data) == HEADER_BYTES + bits.nbytes
    round_trip(bits, DTYPES[name])


def test_sparse_bools_and_small_ints_are_coded() -> None:
    for name in ("BOOL", "I64"):
        payload = encode_full(typical(DTYPES[name], 100_000, np.random.default_rng(7), 1), name)
        assert payload.coding == CODING_PLANES
        assert payload.ratio < 0.5


def test_threads_give_identical_bytes_and_results() -> None:
    bits = typical(DTYPES["BF16"], 300_000, np.random.default_rng(8), 0.02)
    one, two = (encode_full(bits, "BF16", threads=t, block_elements=10_000) for t in (1, 2))
    assert one.data == two.data
    outs = [decode_full(one, np.empty_like(bits), threads=t) for t in (1, 2)]
    assert outs[0].tobytes() == outs[1].tobytes() == bits.tobytes()


@pytest.mark.parametrize(
    ("name", "block", "raw_planes"),
    [("BF16", 1000, ()), ("BF16", 777, (1,)), ("F32", 4096, (0, 3)), ("BOOL", 2**24, ())],
)
def test_payloads_written_by_the_spec_decode(name: str, block: int, raw_planes: tuple) -> None:
    """Choices this writer never makes (checksums, odd blocks, coded mantissas) still read."""
    bits = typical(DTYPES[name], 20_000, np.random.default_rng(9), 0.02)
    data = reference.encode(DTYPE_IDS[name], bits.tobytes(), block, raw_planes=raw_planes)
    out = decode_full(data, np.empty_like(bits))
    assert out.tobytes() == bits.tobytes()


def test_a_bad_frame_checksum_is_refused() -> None:
    bits = typical(DTYPES["BF16"], 20_000, np.random.default_rng(10), 0.02)
    data = bytearray(reference.encode(DTYPE_IDS["BF16"], bits.tobytes(), 20_000, raw_planes=(0,)))
    data[-1] ^= 1  # the last section is plane 1's frame; its last byte is the checksum
    with pytest.raises(VerificationError, match="corrupt"):
        decode_full(data, np.empty_like(bits))


# ------------------------------------------------------------------ bad input

BITS = typical(DTYPES["BF16"], 5000, np.random.default_rng(11), 0.02)
GOOD = bytes(encode_full(BITS, "BF16", block_elements=1024).data)  # 5 blocks, plane 1 coded
RAW = bytes(encode_full(BITS[:100], "BF16").data)


def decode_good(data: bytes | bytearray) -> np.ndarray:
    return decode_full(data, np.empty_like(BITS))


def both_refuse(data: bytes | bytearray, match: str) -> None:
    with pytest.raises(VerificationError, match=match):
        decode_full(data, np.empty(read_count(data), np.uint16))
    with pytest.raises(ValueError):
        reference.decode(bytes(data))


def read_count(data: bytes | bytearray) -> int:
    """The header's element count, capped: a destination of that size (the header is checked
    before the destination, so a hostile count must be refused before this one matters)."""
    return min(struct.unpack_from("<Q", data, 8)[0], 10**6) if len(data) >= 16 else 0


def test_the_fixtures_cover_both_codings() -> None:
    assert read_full_header(GOOD).coding == CODING_PLANES
    assert read_full_header(GOOD).sections[:, 1].max() < 1024  # the high plane is coded
    assert read_full_header(RAW).coding == CODING_RAW


@pytest.mark.parametrize("good", [GOOD, RAW])
def test_every_truncation_and_trailing_byte_is_refused(good: bytes) -> None:
    for cut in range(len(good)):
        with pytest.raises(VerificationError):
            decode_full(good[:cut], np.empty(read_count(good), np.uint16))
    both_refuse(good + b"\0", "truncated or padded")


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytearray:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return out


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "match"),
    [
        (0, "<B", ord("X"), "magic"),
        (4, "<B", 2, "version"),
        (5, "<B", 2, "coding"),
        (6, "<B", 0, "dtype id"),
        (6, "<B", 3, "width 2 for F32"),
        (7, "<B", 4, "width 4"),
        (8, "<Q", 2**61, "beyond any tensor"),
        (8, "<Q", 2**40, "its table"),
        (8, "<Q", 5001, "block 4 plane 0 is not a zstd frame"),
        (16, "<I", 0, "block of 0"),
        (16, "<I", 2**24 + 1, "block of"),
        (16, "<I", 1023, "longer than raw"),
        (20, "<I", 1, "reserved"),
        (HEADER_BYTES, "<I", 0, "empty section"),
        (HEADER_BYTES, "<I", 1025, "longer than raw"),
        (HEADER_BYTES + 4, "<I", 1023, "truncated or padded"),
    ],
)
def test_bad_headers_and_tables_are_refused(offset: int, fmt: str, value: int, match: str) -> None:
    both_refuse(patched(GOOD, offset, fmt, value), match)


def test_raw_coding_with_a_block_size_is_refused() -> None:
    both_refuse(patched(RAW, 16, "<I", 1024), "coding 0 with a block")


def test_a_frame_declaring_another_size_is_refused_before_any_write() -> None:
    head = read_full_header(GOOD)
    start = head.body_offset + int(head.sections[0, 0])  # block 0, plane 1: a frame
    frame = GOOD[start : start + int(head.sections[0, 1])]
    params = zstandard.get_frame_parameters(frame)
    assert params.content_size == 1024
    bad = zstandard.ZstdCompressor(level=1).compress(bytes(1023))  # a frame for 1023 bytes
    data = bytearray(GOOD)
    data[start : start + len(frame)] = bad + bytes(len(frame) - len(bad))
    out = np.zeros_like(BITS)
    with pytest.raises(VerificationError, match="declares 1023 bytes"):
        decode_full(data, out)
    assert not out.any(), "memory was written before the error"


def test_every_corrupted_byte_is_refused_or_decodes_to_something_of_the_right_size() -> None:
    """No crash, no read past a buffer: a changed byte raises VerificationError or decodes
    (raw planes and entropy-coded bytes carry no check; the manifest's hash catches those)."""
    refused = 0
    for offset in range(len(GOOD)):
        data = bytearray(GOOD)
        data[offset] ^= 0x5A
        try:
            assert decode_good(data).shape == BITS.shape
        except VerificationError:
            refused += 1
    assert refused >= HEADER_BYTES  # at least every header byte is checked


def test_the_destination_must_match_the_payload() -> None:
    with pytest.raises(VerificationError, match="wrong tensor"):
        decode_full(GOOD, np.empty(4999, np.uint16))
    with pytest.raises(VerificationError, match="wrong tensor"):
        decode_full(GOOD, np.empty(5000, np.uint32))
    with pytest.raises(VerificationError, match="the manifest says F16"):
        decode_full(GOOD, np.empty(5000, np.uint16), dtype="F16")
    with pytest.raises(UsageError, match="C-contiguous"):
        decode_full(GOOD, np.empty((5000, 2), np.uint16)[:, 0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: encode_full(np.zeros(10, np.float32), "BF16"), "4-byte items"),
        (lambda: encode_full(np.zeros(10, np.uint16), "Q8"), "not one of"),
        (lambda: encode_full(np.zeros(10, np.uint16), "BF16", block_elements=0), "block_elements"),
        (lambda: encode_full(np.zeros(10, ">f4"), "F32"), "big-endian"),
        (lambda: decode_full(object(), np.zeros(1)), "FullPayload or bytes"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_are_usage_errors(call: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        call()  # type: ignore[operator]
