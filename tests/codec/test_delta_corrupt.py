"""Malformed payloads: every failure is a VerificationError raised before any write."""

from __future__ import annotations

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codec import reference
from tests.codec.helpers import sparse_pair
from wanrl_s3.codec import decode_delta, encode_delta, read_header
from wanrl_s3.errors import VerificationError

OLD, NEW = sparse_pair(np.random.default_rng(11), 2000, 25)  # 1.25 %: Rice positions
GOOD = encode_delta(OLD, NEW).data
DENSE = OLD.copy()  # 5 %: byte-planed gaps
DENSE[np.random.default_rng(12).choice(OLD.size, 100, replace=False)] ^= np.uint16(0x0101)
GOOD_DENSE = encode_delta(OLD, DENSE).data
# (payload, the version it must decode to) for each position coding
GOODS = {"rice": (GOOD, NEW), "planes": (GOOD_DENSE, DENSE)}


def test_the_fixtures_cover_both_position_codings() -> None:
    assert [read_header(data).coding for data, _ in GOODS.values()] == [1, 2]


def decode_untouched(data: bytes) -> np.ndarray:
    """Decode in place into a copy of OLD; if it raises, the copy must be untouched."""
    target = OLD.copy()
    try:
        return decode_delta(data, target, out=target)
    except VerificationError:
        assert target.tobytes() == OLD.tobytes(), "memory was written before the error"
        raise


@pytest.mark.parametrize(
    ("good", "cut"), [(name, cut) for name, (data, _) in GOODS.items() for cut in range(len(data))]
)
def test_every_truncation_is_refused(good: str, cut: int) -> None:
    with pytest.raises(VerificationError):
        decode_untouched(GOODS[good][0][:cut])


@pytest.mark.parametrize("good", GOODS)
def test_trailing_bytes_are_refused(good: str) -> None:
    with pytest.raises(VerificationError, match="truncated or padded"):
        decode_untouched(GOODS[good][0] + b"\0")


@pytest.mark.parametrize("good", GOODS)
def test_every_single_bit_flip_is_refused_or_harmless(good: str) -> None:
    """A flipped bit is caught (header checks, zstd checksums, stream checks) or changes nothing."""
    payload, expected = GOODS[good]
    harmless = 0
    for offset in range(len(payload)):
        for bit in range(8):
            data = bytearray(payload)
            data[offset] ^= 1 << bit
            try:
                result = decode_untouched(bytes(data))
            except VerificationError:
                continue
            assert result.tobytes() == expected.tobytes(), f"byte {offset} bit {bit}: wrong bits"
            harmless += 1
    assert harmless < 8 * len(payload) // 20  # a few zstd header bits (e.g. window size) only


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzzed_payloads_raise_only_verification_errors(data: st.DataObject) -> None:
    good, expected = GOODS[data.draw(st.sampled_from(sorted(GOODS)))]
    payload = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        offset = data.draw(st.integers(0, len(payload) - 1))
        payload[offset] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        payload = payload[: data.draw(st.integers(0, len(payload)))]
    try:
        result = decode_untouched(bytes(payload))
    except VerificationError:
        return
    assert result.tobytes() == expected.tobytes()


@given(st.binary(max_size=200))
def test_random_bytes_raise_verification_errors(junk: bytes) -> None:
    with pytest.raises(VerificationError):
        decode_untouched(reference.HEADER.pack(b"WRSD", 1, 2, 1, 3, 2000, 5, len(junk), 0) + junk)


def crafted(
    positions: list[int], xors: list[int], k: int = 3, coding: int = 1, **header: object
) -> bytes:
    return reference.payload(2, 2000, positions, xors, k, coding, **header)


CRAFTED = [
    (crafted([5], [1], magic=b"WRSE"), "bad magic"),
    (crafted([5], [1], version=2), "format version 2"),
    (crafted([5], [1], width=3), "element width 3"),
    (crafted([5], [1], coding=3), "position coding 3"),
    (crafted([5], [1], param=64), "rice_k 64"),
    (crafted([5], [1], 2, coding=2, param=3), "gap width 3"),
    (crafted([5], [1], 2, coding=2, param=1), "declares 2 bytes, expected 1"),
    (crafted([5, 9], [1, 1], 2, coding=2, changed=1), "declares 4 bytes, expected 2"),
    (crafted([5, 2000], [1, 1], 2, coding=2), ">= 2000"),
    (crafted([2001], [1], 8, coding=2), "a gap runs past the tensor"),
    (crafted([5], [1], changed=2001), "changed 2001 > total"),
    (crafted([5], [1], total=2**40, changed=2**23), "2\\^63"),
    (crafted([5], [1], changed=0), "empty exactly when"),
    (crafted([5], [1], total=1999), "1999 elements but the base has 2000"),
    (crafted([5], [1], changed=2), "1 unary codes for 2 changes"),
    (crafted([5, 1999 + 8], [1, 1], k=3), "run past the tensor|>= 2000"),
    (crafted([5, 2000], [1, 1], k=12), ">= 2000"),
    (crafted([5, 9], [1, 0]), "zero XOR word"),
]


@pytest.mark.parametrize(("data", "message"), CRAFTED, ids=[m for _, m in CRAFTED])
def test_crafted_payloads_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        decode_untouched(data)


def section_payload(positions_content: bytes, n: int = 1, k: int = 3, **frame: int) -> bytes:
    """A payload whose positions frame holds ``positions_content`` verbatim."""
    pos = zstandard.ZstdCompressor(**frame).compress(positions_content)
    val = zstandard.ZstdCompressor(write_checksum=True).compress(b"\1" * n + b"\0" * n)
    return reference.HEADER.pack(b"WRSD", 1, 2, 1, k, 2000, n, len(pos), len(val)) + pos + val


STREAMS = [
    (section_payload(b"\x05"), "shorter than its remainder bits"),
    (section_payload(b"\xf5\x01"), "nonzero padding"),
    (section_payload(b"\x05\x00"), "0 unary codes for 1"),
    (section_payload(b"\x05\x03"), "more than 1 unary codes"),
    (section_payload(b"\x05\x01\x00"), "trailing bytes"),
    (section_payload(b"\x05" + b"\0" * 100_000 + b"\1"), "declares 100002 bytes"),
    (section_payload(b"\x05\x01", write_content_size=False), "declares -1 bytes"),
]


@pytest.mark.parametrize(("data", "message"), STREAMS, ids=[m for _, m in STREAMS])
def test_malformed_position_streams_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        decode_untouched(data)


def test_a_second_frame_in_a_section_is_refused() -> None:
    frame = zstandard.ZstdCompressor(write_checksum=True).compress
    pos = frame(reference.rice_content([5], 3))
    val = frame(b"\1\0") + frame(b"")
    data = reference.HEADER.pack(b"WRSD", 1, 2, 1, 3, 2000, 1, len(pos), len(val)) + pos + val
    with pytest.raises(VerificationError, match="corrupt or truncated"):
        decode_untouched(data)
