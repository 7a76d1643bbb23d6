"""The codec and docs/delta-format.md agree, field by field and bit by bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codec import reference
from tests.codec.helpers import sparse_pair, versions
from wanrl_s3.codec import decode_delta, encode_delta, read_header
from wanrl_s3.codec import delta as delta_mod
from wanrl_s3.format.dtypes import DType


@settings(max_examples=150, deadline=None)
@given(versions())
def test_reference_reader_decodes_what_the_codec_writes(
    case: tuple[DType, np.ndarray, np.ndarray],
) -> None:
    _, old, new = case
    data = encode_delta(old, new).data
    assert reference.decode(data, old.reshape(-1).tolist()) == new.reshape(-1).tolist()


def reference_payload(old: np.ndarray, new: np.ndarray, param: int, coding: int) -> bytes:
    flat_old, flat_new = old.reshape(-1), new.reshape(-1)
    positions = np.flatnonzero(flat_old != flat_new).tolist()
    xors = (flat_old ^ flat_new)[positions].tolist()
    return reference.payload(old.itemsize, old.size, positions, xors, param, coding)


@settings(max_examples=60, deadline=None)
@given(versions(), st.integers(0, 12))
def test_codec_reads_what_the_reference_writes_with_any_k(case: tuple, k: int) -> None:
    """Any k is valid for a reader, not only the one the codec's writer picks."""
    _, old, new = case
    assert decode_delta(reference_payload(old, new, k, 1), old).tobytes() == new.tobytes()


@settings(max_examples=60, deadline=None)
@given(versions(), st.sampled_from([1, 2, 4, 8]))
def test_codec_reads_byte_planed_gaps_of_any_width(case: tuple, width: int) -> None:
    """Coding 2 at every width that holds the gaps, not only the narrowest the writer picks."""
    _, old, new = case
    if old.size > 256 and width == 1:
        width = 2  # a one-byte gap cannot span this tensor
    data = reference_payload(old, new, width, 2)
    assert decode_delta(data, old).tobytes() == new.tobytes()


@pytest.mark.parametrize(
    ("density", "coding"), [(0.001, 1), (0.01, 1), (0.02, 2), (0.05, 2), (0.2, 2), (0.5, 1)]
)
def test_writer_codes_positions_by_density(density: float, coding: int) -> None:
    """Byte-planed gaps between about 1.5 and 20 % density, Rice elsewhere; both decode."""
    old, new = sparse_pair(np.random.default_rng(3), 100_000, int(100_000 * density))
    data = encode_delta(old, new).data
    head = read_header(data)
    assert head.coding == coding
    if coding == 2:
        gaps = np.diff(np.flatnonzero(old != new), prepend=-1) - 1
        assert head.param == (1 if gaps.max() < 256 else 2)  # the narrowest width
    assert reference.decode(data, old.tolist()) == new.tolist()


def test_header_fields_sit_where_the_page_says() -> None:
    old, new = sparse_pair(np.random.default_rng(1), 1000, 10, np.uint32)
    data = encode_delta(old, new).data
    head = read_header(data)
    assert data[0:4] == b"WRSD" and data[4] == 1 and data[5] == 4 and data[6] == head.coding == 1
    assert data[7] == head.param
    assert int.from_bytes(data[8:16], "little") == 1000
    assert int.from_bytes(data[16:24], "little") == 10
    pos_len = int.from_bytes(data[24:32], "little")
    assert 40 + pos_len + int.from_bytes(data[32:40], "little") == len(data)


@pytest.mark.parametrize("k", range(0, 64))
def test_bit_fields_are_lsb_first_for_every_k(k: int) -> None:
    """Both packers (k <= 8 grouped, k > 8 generic) write the page's bit order."""
    rng = np.random.default_rng(k)
    for n in (1, 7, 8, 9, 23):
        fields = rng.integers(0, 1 << k, n, dtype=np.uint64) if k else np.zeros(n, np.uint64)
        packed = delta_mod._pack_fields(fields, k).tobytes()
        bits = [(int(f) >> b) & 1 for f in fields for b in range(k)]
        assert packed == reference.bit_stream(bits)
        unpacked = delta_mod._unpack_fields(np.frombuffer(packed, np.uint8), n, k)
        assert unpacked.tolist() == fields.tolist()


def test_writer_picks_the_cheapest_k_for_geometric_gaps() -> None:
    """The k the writer uses is within one of the exhaustive optimum on real gaps."""
    rng = np.random.default_rng(2)
    for density in (0.3, 0.05, 0.01, 0.001):
        positions = np.flatnonzero(rng.random(200_000) < density)
        gaps = delta_mod._gaps(positions).view(np.uint64)
        cost = [positions.size * (k + 1) + int((gaps >> np.uint64(k)).sum()) for k in range(30)]
        chosen = delta_mod.rice_parameter(positions.size, int(positions[-1]) + 1)
        assert cost[chosen] <= 1.01 * min(cost)
