"""Bit-exact sparse deltas between two versions of one tensor (invariant 3).

A delta lists the elements whose bit pattern changed and, for each, the XOR of
the old and the new bits. Applying it is an XOR again, so the result is the
published bit pattern exactly, for every dtype, NaN payloads and -0.0 included.
No float is ever added or subtracted: arithmetic deltas drift.

The byte format is specified in ``docs/delta-format.md``. In short: a 40-byte
little-endian header, then two zstd frames. Positions travel as the gaps
between changed elements; values travel as XOR words split into byte planes so
zstd's entropy coder sees the low bytes (where bf16 updates land) apart from
the mostly-zero high bytes.

The gaps are coded one of two ways, chosen by density (``_position_coding``):

- Rice (k low bits packed, the rest in unary) when changes are sparse. zstd on
  byte-planed gaps loses there, because gaps spread past one byte: measured on
  uniform random positions, 8.6 bits per change at 1 % density and 10.0 at
  0.5 % against entropy bounds of 8.08 and 9.08; Rice spends 8.11 and 9.11.
- Byte-planed gaps when the Rice k is 2..5 (about 1.5 to 20 % density). There
  zstd's Huffman stage lands 1.2-3 % above the bound (Rice: 0.4-1.4 %), and
  decoding skips the unary bit scan, the slowest step of a dense decode: about
  3 ns per change instead of 10.

Both streams pass through zstd, which finds runs in clustered positions and
carries a checksum.

``pack_changes`` is the one serialiser behind both the numpy path here and the
torch path (``torch_delta``), so the two produce identical bytes.
"""

from __future__ import annotations

import itertools
import math
import os
import struct
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import numpy as np
import zstandard

from ..errors import UsageError, VerificationError

MAGIC = b"WRSD"
FORMAT_VERSION = 1
POSITIONS_RICE = 1  # position coding ids (header byte 6); the param byte is the Rice k
POSITIONS_PLANES = 2  # ... or the gaps' width in bytes
PLANES_RICE_K = range(2, 6)  # the densities (by their Rice k) where byte-planed gaps win
_HEADER = struct.Struct("<4sBBBBQQQQ")
HEADER_BYTES = _HEADER.size  # 40
WIDTHS = (1, 2, 4, 8)
MAX_RICE_K = 63

# Inputs are compared as 64-bit words in slices of CHUNK_WORDS (1 MiB of each
# input), so the XOR scratch stays in cache; arrays of at least
# PARALLEL_MIN_WORDS words (~1 ms of work) are split across threads (numpy
# releases the GIL).
CHUNK_WORDS = 1 << 17
PARALLEL_MIN_WORDS = 1 << 16
SCATTER_CHUNK = 1 << 16
APPLY_BLOCK = 1 << 18  # elements copied and patched together (512 KiB of bf16)
RICE_CHUNK = 1 << 16  # a multiple of 8: every chunk's k-bit fields start on a byte
MAX_THREADS = 8
SPARSE_PLANE = 8  # a high byte plane with at most 1/8 nonzero bytes is added sparsely

# Every frame carries a checksum and its content size; the reader relies on both.
_FRAME_FLAGS = {"write_checksum": 1, "write_content_size": 1}

# An encoder gives up before packing when even an ideal coder for unstructured
# changes would need GIVE_UP times max_bytes (see ``estimated_bytes``).
GIVE_UP = 1.5

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class DeltaPayload:
    """An encoded delta: ``data`` is the self-describing byte string that travels."""

    data: bytes
    changed: int  # elements whose bits differ
    total: int  # elements in the tensor

    def __post_init__(self) -> None:
        if not 0 <= self.changed <= self.total:
            raise UsageError(f"DeltaPayload: changed={self.changed} not in [0, {self.total}]")

    @property
    def density(self) -> float:
        """Fraction of elements that changed (0.0 for an empty tensor)."""
        return self.changed / self.total if self.total else 0.0


@dataclass(frozen=True)
class DeltaHeader:
    """The fields of a payload's header, validated against the payload's length."""

    width: int  # bytes per element: 1, 2, 4 or 8
    total: int
    changed: int
    coding: int  # POSITIONS_RICE or POSITIONS_PLANES
    param: int  # the Rice k, or the gaps' width in bytes
    positions_bytes: int
    values_bytes: int


# --------------------------------------------------------------------------- API


def encode_delta(
    base_bits: np.ndarray,
    new_bits: np.ndarray,
    *,
    level: int = 3,
    max_bytes: int | None = None,
    threads: int | None = None,
) -> DeltaPayload | None:
    """Encode what changed from ``base_bits`` to ``new_bits`` (unsigned bit views).

    Both arrays must have the same shape and the same unsigned dtype (uint8/16/
    32/64: view bf16 as uint16 and so on, ``DType.bits``); they are treated as
    flat. Returns None when the payload would exceed ``max_bytes``: the caller
    then ships the raw bytes. ``threads`` defaults to the machine's cores (max 8).
    """
    base, new = _flat_pair(base_bits, new_bits)
    workers = _thread_count(threads)
    positions, values = _changes(base, new, workers)
    return pack_changes(
        positions, values, total=base.size, level=level, max_bytes=max_bytes, threads=workers
    )


def decode_delta(
    payload: DeltaPayload | bytes | bytearray | memoryview,
    base_bits: np.ndarray,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Apply ``payload`` to ``base_bits`` by XOR; return the new bits.

    ``out`` receives the result (same shape and dtype, C-contiguous); it may be
    ``base_bits`` itself to apply in place. The whole payload is validated before
    any memory is written: a delta for another width or element count, a corrupt
    or truncated frame, or out-of-range positions raise VerificationError.
    Applying to the wrong base of the right size is not detectable here; the
    caller checks the hash the manifest records for the result.
    """
    base = _bits_array(base_bits, "base_bits")
    _check_out(base, out)
    positions, values = unpack_changes(_payload_bytes(payload), total=base.size, dtype=base.dtype)
    if out is None:
        out = np.empty(base.shape, base.dtype)
    source = None if out is base else np.ascontiguousarray(base).reshape(-1)
    _apply(out.reshape(-1), source, positions, values)
    return out


def read_header(data: bytes | bytearray | memoryview) -> DeltaHeader:
    """Parse and check a payload's header (magic, version, widths, section lengths)."""
    if len(data) < HEADER_BYTES:
        raise VerificationError(
            f"delta payload is {len(data)} bytes, shorter than its {HEADER_BYTES}-byte header"
        )
    magic, version, width, coding, param, total, changed, pos_len, val_len = _HEADER.unpack_from(
        data
    )
    _check(magic == MAGIC, f"delta payload: bad magic {magic!r}, expected {MAGIC!r}")
    _check(version == FORMAT_VERSION, f"delta payload: format version {version} is not supported")
    _check(width in WIDTHS, f"delta payload: element width {width} not in {WIDTHS}")
    _check(
        coding in (POSITIONS_RICE, POSITIONS_PLANES),
        f"delta payload: unknown position coding {coding}",
    )
    if coding == POSITIONS_RICE:
        _check(param <= MAX_RICE_K, f"delta payload: rice_k {param} > {MAX_RICE_K}")
    else:
        _check(param in WIDTHS, f"delta payload: gap width {param} not in {WIDTHS}")
    _check(changed <= total, f"delta payload: changed {changed} > total {total}")
    _check(
        changed * total < 1 << 63,
        f"delta payload: {changed} changes x {total} elements exceeds this reader's 2^63 limit",
    )
    _check(
        len(data) == HEADER_BYTES + pos_len + val_len,
        f"delta payload is {len(data)} bytes but its header promises "
        f"{HEADER_BYTES} + {pos_len} + {val_len}: truncated or padded",
    )
    _check(
        (changed == 0) == (pos_len == 0) == (val_len == 0),
        "delta payload: sections must be empty exactly when nothing changed",
    )
    return DeltaHeader(width, total, changed, coding, param, pos_len, val_len)


# ----------------------------------------------------------------- serialising


def pack_changes(
    positions: np.ndarray,
    values: np.ndarray,
    *,
    total: int,
    level: int = 3,
    max_bytes: int | None = None,
    threads: int | None = None,
) -> DeltaPayload | None:
    """Serialise strictly increasing int64 ``positions`` and their nonzero XOR ``values``.

    The one packing function of both the numpy and the torch paths. ``values``
    has the element's unsigned dtype. Returns None when the payload would exceed
    ``max_bytes`` (the caller ships raw bytes instead); gives up before packing
    when ``estimated_bytes`` says it is clearly too dense.
    """
    _check_level(level)
    width, changed = values.dtype.itemsize, positions.size
    if values.dtype.kind != "u" or width not in WIDTHS or values.size != changed:
        raise UsageError(
            f"pack_changes: {changed} positions with values {values.dtype}[{values.size}]"
        )
    if changed == 0:
        return _finish(
            _header(width, total, 0, POSITIONS_RICE, 0, 0, 0), b"", b"", 0, total, max_bytes
        )
    if max_bytes is not None and estimated_bytes(changed, total, values) > GIVE_UP * max_bytes:
        return None
    gaps = _gaps(positions.astype(np.int64, copy=False))
    if int(gaps.min()) < 0 or int(positions[-1]) >= total:
        raise UsageError(f"pack_changes: positions must increase strictly and stay below {total}")
    coding, param = _position_coding(gaps, int(positions[-1]) + 1)
    jobs: list[Callable[[], bytes]] = [
        lambda: _encode_positions(gaps, coding, param, level),
        lambda: _compress(_byte_planes(values), _planes_params(level)),
    ]
    pos_z, val_z = _parallel_map(_call, jobs, _thread_count(threads))
    header = _header(width, total, changed, coding, param, len(pos_z), len(val_z))
    return _finish(header, pos_z, val_z, changed, total, max_bytes)


def unpack_changes(
    data: bytes | bytearray | memoryview, *, total: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a payload for a tensor of ``total`` elements of ``dtype``; return its changes.

    Returns int64 positions (strictly increasing, < total) and nonzero XOR words
    of ``dtype``; raises VerificationError on anything else, before the caller
    touches memory. The two sections decode one after the other: on two
    threads, the GIL hand-offs between their many short numpy calls cost more
    than the overlap gains (measured over a 550M-parameter snapshot: 234 ms on
    two threads against 179 ms on one at 0.5 % density, 385 against 324 at 5 %).
    """
    head = read_header(data)
    if head.width != dtype.itemsize:
        raise VerificationError(
            f"delta is for {head.width}-byte elements but the base has {dtype.itemsize}-byte "
            "elements: wrong tensor or dtype"
        )
    if head.total != total:
        raise VerificationError(
            f"delta is for {head.total} elements but the base has {total}: wrong tensor or shape"
        )
    if head.changed == 0:
        return np.empty(0, np.int64), np.empty(0, dtype)
    body = memoryview(data)[HEADER_BYTES:]
    positions = _decode_positions(body[: head.positions_bytes], head)
    return positions, _decode_values(body[head.positions_bytes :], head, dtype)


def _decode_positions(section: memoryview, head: DeltaHeader) -> np.ndarray:
    n, total = head.changed, head.total
    if head.coding == POSITIONS_PLANES:
        raw = _decompress(section, n * head.param, exact=True, what="positions")
        return _plane_positions(raw, n, head.param, total)
    k = head.param
    limit = _fields_bytes(n, k) + (n + (total >> k)) // 8 + 1  # unary bits <= n + total >> k
    raw = _decompress(section, limit, exact=False, what="positions")
    return _rice_positions(raw, n, k, total)


def _decode_values(section: memoryview, head: DeltaHeader, dtype: np.dtype) -> np.ndarray:
    raw = _decompress(section, head.changed * head.width, exact=True, what="values")
    values = _from_planes(raw, head.changed, dtype)
    _check(np.count_nonzero(values) == head.changed, "delta values section holds a zero XOR word")
    return values


def estimated_bytes(changed: int, total: int, values: np.ndarray) -> float:
    """Ideal payload bytes for ``changed`` unstructured changes among ``total`` elements.

    Positions: total * H(changed/total) bits; values: the order-0 entropy of (a
    sample of) the XOR words. The encoder lands within a few percent above this
    on unstructured changes; structured ones can come out smaller, which is why
    the give-up test leaves a factor of GIVE_UP.
    """
    sample = values[: 1 << 16]
    return (total * binary_entropy(changed / total) + changed * order0_entropy(sample)) / 8


def binary_entropy(p: float) -> float:
    """H(p) in bits: the entropy bound per element for positions that change with chance p."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def order0_entropy(words: np.ndarray) -> float:
    """Bits per word of the order-0 (symbol frequency) entropy of ``words``."""
    if words.size == 0:
        return 0.0
    counts = np.unique(words, return_counts=True)[1].astype(np.float64)
    p = counts / words.size
    return float(-(p * np.log2(p)).sum())


def rice_parameter(changed: int, span: int) -> int:
    """The Rice k that minimises the expected bits for geometric gaps of this mean.

    ``span`` is the last position + 1, so the mean gap is (span - changed) /
    changed without a pass over the data. Cost per gap: k + 1 + E[g >> k], and
    for geometric g with ratio t, E[g >> k] = t^(2^k) / (1 - t^(2^k)).
    """
    mean = (span - changed) / changed
    if mean <= 0.0:
        return 0
    t = mean / (1.0 + mean)

    def cost(k: int) -> float:
        tk = t ** (2.0**k)
        return k + 1 + (tk / (1.0 - tk) if tk < 1.0 else math.inf)

    return min(range(MAX_RICE_K + 1), key=cost)


# ------------------------------------------------------------------- scanning


def _changes(base: np.ndarray, new: np.ndarray, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (int64, increasing) and XOR words of the elements whose bits differ.

    The bulk is compared as 64-bit words (8 / width elements each); only the
    few words that differ are expanded to elements. The last elements that do
    not fill a word are compared one by one.
    """
    lanes = 8 // base.itemsize
    words = base.size // lanes
    main = words * lanes
    base_w, new_w = base[:main].view(np.uint64), new[:main].view(np.uint64)
    splits = threads if words >= PARALLEL_MIN_WORDS else 1
    bounds = np.linspace(0, words, splits + 1).astype(np.int64)
    parts = _parallel_map(
        lambda lo_hi: _scan_words(base_w, new_w, lo_hi[0], lo_hi[1], base.dtype),
        list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)),
        splits,
    )
    tail = np.flatnonzero(base[main:] != new[main:]) + main
    parts.append((tail, base[tail] ^ new[tail]))
    return np.concatenate([p for p, _ in parts]), np.concatenate([v for _, v in parts])


def _scan_words(
    base_w: np.ndarray, new_w: np.ndarray, lo: int, hi: int, elem: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """Changes inside words [lo, hi), one cache-sized slice at a time.

    XOR the slice into a scratch buffer, find the nonzero words, and expand
    only those into elements; everything after the XOR runs on cached data.
    """
    lanes = 8 // elem.itemsize
    shift = lanes.bit_length() - 1
    scratch = np.empty(min(CHUNK_WORDS, max(hi - lo, 0)), dtype=np.uint64)
    differs = np.empty(scratch.size, dtype=bool)
    positions: list[np.ndarray] = [np.empty(0, np.int64)]
    values: list[np.ndarray] = [np.empty(0, elem)]
    for start in range(lo, hi, CHUNK_WORDS):
        stop = min(start + CHUNK_WORDS, hi)
        xor, nonzero = scratch[: stop - start], differs[: stop - start]
        np.bitwise_xor(base_w[start:stop], new_w[start:stop], out=xor)
        np.not_equal(xor, 0, out=nonzero)
        idx = np.flatnonzero(nonzero)
        if idx.size:
            lanes_xor = xor[idx].view(elem)  # the lanes of each nonzero word
            lane = np.flatnonzero(lanes_xor != 0)
            positions.append(((idx[lane >> shift] + start) << shift) | (lane & (lanes - 1)))
            values.append(lanes_xor[lane])
    return np.concatenate(positions), np.concatenate(values)


def _apply(
    dest: np.ndarray, source: np.ndarray | None, positions: np.ndarray, values: np.ndarray
) -> None:
    """dest = source XOR the changes (in place when ``source`` is None), block by block.

    With a source, each APPLY_BLOCK-element block is copied and then patched
    while it is still in cache: the scatter costs cache hits instead of DRAM
    misses. Positions are unique and sorted, so every block's changes are one
    slice and the fancy-indexed XOR is exact.
    """
    block = APPLY_BLOCK if source is not None else max(dest.size, 1)
    starts = np.arange(0, dest.size + block, block)
    cuts = np.searchsorted(positions, starts).tolist()
    for lo, (first, last) in zip(starts.tolist(), itertools.pairwise(cuts), strict=False):
        if source is not None:
            dest[lo : lo + block] = source[lo : lo + block]
        for start in range(first, last, SCATTER_CHUNK):
            chunk = slice(start, min(start + SCATTER_CHUNK, last))
            dest[positions[chunk]] ^= values[chunk]


# ------------------------------------------------------------------- positions


def _gaps(positions: np.ndarray) -> np.ndarray:
    """Gap i = positions[i] - positions[i-1] - 1 (the first counts from -1); int64."""
    gaps = np.empty_like(positions)
    gaps[:1] = positions[:1]
    np.subtract(positions[1:], positions[:-1], out=gaps[1:])
    gaps[1:] -= 1
    return gaps


def _position_coding(gaps: np.ndarray, span: int) -> tuple[int, int]:
    """(coding, param) for these gaps: byte planes where they beat Rice (module docstring)."""
    k = rice_parameter(gaps.size, span)
    if k in PLANES_RICE_K:
        return POSITIONS_PLANES, _narrowest_width(int(gaps.max()))
    return POSITIONS_RICE, k


def _encode_positions(gaps: np.ndarray, coding: int, param: int, level: int) -> bytes:
    if coding == POSITIONS_PLANES:
        return _compress(_byte_planes(gaps.astype(f"<u{param}")), _planes_params(level))
    return _compress(_rice_encode(gaps, param), _positions_params(level))


def _narrowest_width(largest: int) -> int:
    return next(w for w in WIDTHS if largest < 1 << (8 * w))


def _plane_positions(raw: bytes, n: int, width: int, total: int) -> np.ndarray:
    """Positions from byte-planed gaps, validated: in [0, total) and strictly increasing.

    Position i is the running sum of (gap + 1), minus one. The low plane is
    widened (and incremented) in one pass; higher planes are mostly zero at the
    densities this coding is chosen for (``_add_high_planes``).
    Every step adds gap + 1 >= 1, so positions increase strictly as long as
    the sum stays below 2^63: true when n << (8 * width) is, and otherwise
    every gap is checked against ``total`` first (changed * total < 2^63,
    ``read_header``). Increasing positions are all in range when the last is.
    """
    planes = np.frombuffer(raw, np.uint8).reshape(width, n)
    if n << (8 * width) >= 1 << 63:
        gaps = _from_planes(raw, n, np.dtype(f"<u{width}"))
        _check(int(gaps.max()) < total, "delta positions: a gap runs past the tensor")
    positions = np.empty(n, np.int64)
    np.add(planes[0], 1, out=positions, dtype=np.int64)
    _add_high_planes(planes, positions)
    positions[0] -= 1
    np.cumsum(positions, out=positions)
    _check(int(positions[-1]) < total, f"delta position {int(positions[-1])} >= {total} elements")
    return positions


def _rice_encode(gaps: np.ndarray, k: int) -> np.ndarray:
    """k low bits of every gap, bit-packed LSB first; then each gap >> k in unary.

    One pass of RICE_CHUNK gaps at a time (a multiple of 8, so each chunk's
    fields start on a byte) keeps the temporaries in cache. The unary code of
    gap i ends with a one bit at (sum of the quotients up to i) + i.
    """
    n, mask = gaps.size, (1 << k) - 1
    fields = np.empty(_fields_bytes(n, k), np.uint8)
    unary = np.zeros(int((gaps >> k).sum()) + n, dtype=bool)
    quotient_sum = 0
    for start in range(0, n, RICE_CHUNK):
        chunk = gaps[start : start + RICE_CHUNK]
        packed = _pack_fields((chunk & mask).view(np.uint64), k)
        fields[start * k // 8 : start * k // 8 + packed.size] = packed
        ones = np.cumsum(chunk >> k)
        ones += np.arange(start + quotient_sum, start + quotient_sum + chunk.size)
        quotient_sum = int(ones[-1]) - (start + chunk.size - 1)
        unary[ones] = True
    return np.concatenate((fields, np.packbits(unary, bitorder="little")))


def _rice_positions(raw: bytes, n: int, k: int, total: int) -> np.ndarray:
    """Positions from a Rice stream, validated: in [0, total) and strictly increasing.

    Without materialising the gaps: if one-bit i of the unary stream sits at
    bit u_i, the quotients so far sum to u_i - i, and with R_i the sum of the
    remainders so far, position i = ((u_i - i) << k) + i + R_i
    = (u_i << k) + sum over j <= i of (r_j - (2^k - 1)) + (2^k - 1):
    one shift of the unary offsets (in place) plus one running sum, RICE_CHUNK
    at a time so the temporaries stay in cache.

    Every step adds gap + 1 >= 1, so positions increase strictly as long as
    the true values stay below 2^63: the quotient sum is checked before any
    arithmetic, and remainders < total keep R_i below changed * total < 2^63
    (``read_header``). The arithmetic runs in uint64, whose wrap-around is
    exact modulo 2^64, so intermediate terms such as u_i << k may overflow
    while the result does not. Increasing positions are all in range when the
    last one is.
    """
    buf = np.frombuffer(raw, np.uint8)
    split = _fields_bytes(n, k)
    _check(buf.size > split, "delta positions section is shorter than its remainder bits")
    positions = _unary_ones(buf[split:], n)
    _check(int(positions[-1]) - (n - 1) <= (total - 1) >> k, "delta positions run past the tensor")
    ramp = np.uint64((1 << k) - 1)
    carry = ramp
    unsigned = positions.view(np.uint64)
    for start in range(0, n, RICE_CHUNK):
        stop = min(start + RICE_CHUNK, n)
        sums = _unpack_fields(buf[start * k // 8 : _fields_bytes(stop, k)], stop - start, k)
        _check(int(sums.max()) < total, "delta positions: a gap runs past the tensor")
        sums -= ramp
        np.add(sums[:1], carry, out=sums[:1])
        np.cumsum(sums, out=sums)
        carry = sums[-1]
        chunk = unsigned[start:stop]
        chunk <<= np.uint64(k)
        chunk += sums
    _check(int(positions[-1]) < total, f"delta position {int(positions[-1])} >= {total} elements")
    return positions


def _fields_bytes(n: int, k: int) -> int:
    return (n * k + 7) // 8


def _pack_fields(fields: np.ndarray, k: int) -> np.ndarray:
    """Pack k-bit uint64 fields into a little-endian bit stream (LSB first).

    For k <= 8, eight fields fill exactly k bytes: OR them into one uint64 per
    group (a few vector passes). Wider fields are rare (k > 8 means < 0.3 %
    density, so few changes) and take the generic unpackbits route.
    """
    n = fields.size
    if k == 0:
        return np.empty(0, np.uint8)
    if k > 8:
        rows = fields.astype("<u8").view(np.uint8).reshape(n, 8)
        bits = np.unpackbits(rows, axis=1, bitorder="little")[:, :k]
        return np.packbits(bits, bitorder="little")
    flat = np.zeros(-(-n // 8) * 8, np.uint64)
    flat[:n] = fields
    groups = flat.reshape(-1, 8)
    words = groups[:, 0].copy()
    for j in range(1, 8):  # strided passes beat a (groups, 8) temporary here
        words |= groups[:, j] << np.uint64(j * k)
    packed = words.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :k]
    return packed.reshape(-1)[: _fields_bytes(n, k)]


def _unpack_fields(buf: np.ndarray, n: int, k: int) -> np.ndarray:
    """Inverse of ``_pack_fields``; the padding bits after the last field must be 0."""
    used = n * k % 8
    _check(used == 0 or int(buf[-1]) >> used == 0, "delta remainder bits: nonzero padding")
    if k == 0:
        return np.zeros(n, np.uint64)
    if k > 8:
        bits = np.unpackbits(buf, count=n * k, bitorder="little").reshape(n, k)
        wide = np.zeros((n, 64), np.uint8)
        wide[:, :k] = bits
        return np.packbits(wide, axis=1, bitorder="little").view("<u8").reshape(-1)
    groups = -(-n // 8)
    padded = np.zeros(groups * k + 8, np.uint8)  # 8 bytes of slack: every read is a whole word
    padded[: buf.size] = buf
    # Eight k-bit fields fill k bytes: read each group's bytes as one (unaligned) little-endian
    # word, then shift every lane down into its own uint64.
    words = np.ndarray((groups, 1), "<u8", padded, strides=(k, 0))
    fields = np.empty((groups, 8), np.uint64)
    np.right_shift(words, _lane_shifts(k), out=fields)
    fields &= np.uint64((1 << k) - 1)
    return fields.reshape(-1)[:n]


def _lane_shifts(k: int) -> np.ndarray:
    return np.arange(0, 8 * k, k, dtype=np.uint64)


def _unary_ones(buf: np.ndarray, n: int) -> np.ndarray:
    """Bit offsets of the one bits of a unary stream: exactly n, the last in the last byte.

    Unpacked RICE_CHUNK bytes at a time, so the bit array never leaves the cache.
    """
    ones = np.empty(n, np.int64)
    found = 0
    for start in range(0, buf.size, RICE_CHUNK):
        bits = np.unpackbits(buf[start : start + RICE_CHUNK], bitorder="little").view(np.bool_)
        offsets = np.flatnonzero(bits)
        _check(found + offsets.size <= n, f"delta positions: more than {n} unary codes")
        offsets += 8 * start
        ones[found : found + offsets.size] = offsets
        found += offsets.size
    _check(found == n, f"delta positions: {found} unary codes for {n} changes")
    _check(ones[-1] >= 8 * (buf.size - 1), "delta positions: trailing bytes after the last gap")
    return ones


# ------------------------------------------------------------ values (planes)


def _byte_planes(values: np.ndarray) -> np.ndarray:
    """All least-significant bytes first, then the next plane, and so on.

    Shifts rather than a byte transpose: numpy's strided uint8 copy is ~20x slower.
    """
    planes = np.empty((values.dtype.itemsize, values.size), np.uint8)
    for j, plane in enumerate(planes):
        np.right_shift(values, 8 * j, out=plane, casting="unsafe")
    return planes


def _from_planes(raw: bytes, n: int, dtype: np.dtype) -> np.ndarray:
    """The n words of ``dtype`` whose byte planes ``raw`` holds (inverse of ``_byte_planes``)."""
    planes = np.frombuffer(raw, np.uint8).reshape(dtype.itemsize, n)
    words = planes[0].astype(dtype)
    _add_high_planes(planes, words)
    return words


def _add_high_planes(planes: np.ndarray, words: np.ndarray) -> None:
    """Add byte plane j (j >= 1) of ``planes`` into ``words``, shifted to byte j.

    ``words`` already holds plane 0 (plus anything that cannot carry into byte 1
    and up, such as the +1 of a gap). High planes of small XOR words and gaps are
    mostly zero: a sparse plane is added only where it is nonzero, saving three
    full passes; a dense one is added whole.
    """
    for j in range(1, planes.shape[0]):
        plane, shift = planes[j], 8 * j
        nonzero = np.count_nonzero(plane)
        if nonzero == 0:
            continue
        if nonzero <= plane.size // SPARSE_PLANE:
            rows = np.flatnonzero(plane != 0)  # 5x faster than flatnonzero on uint8
            words[rows] += np.left_shift(plane[rows], shift, dtype=words.dtype)
        else:
            words += np.left_shift(plane, shift, dtype=words.dtype)


# ---------------------------------------------------------------- zstd frames


def _positions_params(level: int) -> zstandard.ZstdCompressionParameters:
    """Plain zstd at ``level``: Rice streams are near-random, zstd only finds runs in them."""
    return zstandard.ZstdCompressionParameters.from_level(level, **_FRAME_FLAGS)


def _planes_params(level: int) -> zstandard.ZstdCompressionParameters:
    """Few, long matches only: byte planes of XOR words and gaps are near-i.i.d., where short
    LZ matches cost more bits than Huffman literals (measured on +-1 ulp bf16 words, entropy
    2.0 bits: level 3 defaults 2.70 bits, these overrides 2.28; 128 KiB blocks keep Huffman
    tables cheap).
    """
    return zstandard.ZstdCompressionParameters.from_level(
        level, min_match=7, hash_log=6, chain_log=6, search_log=1, window_log=17, **_FRAME_FLAGS
    )


def _compress(raw: np.ndarray, params: zstandard.ZstdCompressionParameters) -> bytes:
    return zstandard.ZstdCompressor(compression_params=params).compress(
        raw.tobytes() if not raw.flags.c_contiguous else raw.data
    )


def _decompress(section: memoryview, limit: int, *, exact: bool, what: str) -> bytes:
    """One complete zstd frame whose declared size is ``limit`` (exact) or at most it."""
    try:
        size = zstandard.frame_content_size(section)
    except zstandard.ZstdError as exc:
        raise VerificationError(f"delta {what} section is not a zstd frame: {exc}") from exc
    ok = size == limit if exact else 0 < size <= limit
    expected = f"{'' if exact else '<= '}{limit}"
    _check(ok, f"delta {what} section declares {size} bytes, expected {expected}")
    try:
        return zstandard.ZstdDecompressor().decompress(
            section, max_output_size=limit, allow_extra_data=False
        )
    except zstandard.ZstdError as exc:
        raise VerificationError(f"delta {what} section is corrupt or truncated: {exc}") from exc


# ---------------------------------------------------------------------- helpers


def _header(
    width: int, total: int, changed: int, coding: int, param: int, pos_len: int, val_len: int
) -> bytes:
    return _HEADER.pack(
        MAGIC, FORMAT_VERSION, width, coding, param, total, changed, pos_len, val_len
    )


def _finish(
    header: bytes, pos_z: bytes, val_z: bytes, changed: int, total: int, max_bytes: int | None
) -> DeltaPayload | None:
    data = b"".join((header, pos_z, val_z))
    if max_bytes is not None and len(data) > max_bytes:
        return None
    return DeltaPayload(data, changed, total)


def _check(ok: bool, message: str) -> None:
    """Raise VerificationError(message) unless ``ok``: the reader's one failure mode."""
    if not ok:
        raise VerificationError(message)


def _check_level(level: int) -> None:
    if not 1 <= level <= zstandard.MAX_COMPRESSION_LEVEL:
        raise UsageError(f"zstd level {level} not in 1..{zstandard.MAX_COMPRESSION_LEVEL}")


def _bits_array(array: np.ndarray, what: str) -> np.ndarray:
    """``array`` as a numpy array of an unsigned little-endian dtype, else UsageError."""
    a = np.asarray(array)
    if a.dtype.kind != "u" or a.dtype.itemsize not in WIDTHS:
        raise UsageError(
            f"{what}: dtype {a.dtype} is not an unsigned bit view; view the tensor as its "
            "DType.bits first (bf16 -> uint16, f32 -> uint32, bool -> uint8)"
        )
    if a.dtype.byteorder == ">":
        raise UsageError(f"{what}: big-endian {a.dtype}; convert to little-endian first")
    return a


def _flat_pair(base_bits: np.ndarray, new_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    base, new = _bits_array(base_bits, "base_bits"), _bits_array(new_bits, "new_bits")
    if base.shape != new.shape or base.dtype != new.dtype:
        raise UsageError(
            f"base_bits {base.dtype}{list(base.shape)} and new_bits {new.dtype}{list(new.shape)}"
            " must have the same shape and dtype"
        )
    return np.ascontiguousarray(base).reshape(-1), np.ascontiguousarray(new).reshape(-1)


def _check_out(base: np.ndarray, out: np.ndarray | None) -> None:
    """``out`` (if given) must be writeable in place: same shape and dtype, C-contiguous."""
    if out is None:
        return
    if out.shape != base.shape or out.dtype != base.dtype:
        raise UsageError(
            f"out {out.dtype}{list(out.shape)} must match base {base.dtype}{list(base.shape)}"
        )
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise UsageError("out must be a writeable C-contiguous array")


def _payload_bytes(
    payload: DeltaPayload | bytes | bytearray | memoryview,
) -> bytes | bytearray | memoryview:
    if isinstance(payload, DeltaPayload):
        return payload.data
    if isinstance(payload, bytes | bytearray | memoryview):
        return memoryview(payload).cast("B") if isinstance(payload, memoryview) else payload
    raise UsageError(f"payload must be DeltaPayload or bytes, not {type(payload).__name__}")


def _thread_count(threads: int | None) -> int:
    if threads is None:
        return _usable_cores()
    if not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"threads={threads} not in 1..{MAX_THREADS}")
    return threads


@lru_cache(maxsize=1)
def _usable_cores() -> int:
    """Cores this process may run on (its affinity, not the host's count), at most MAX_THREADS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, MAX_THREADS))


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="wanrl-codec")


# A forked child inherits the pool object but none of its threads: it would wait forever
# on the first parallel job (a trainer that forks workers after publishing). It makes its own.
os.register_at_fork(after_in_child=_pool.cache_clear)


def _parallel_map(fn: Callable[[_T], _R], items: Sequence[_T], workers: int) -> list[_R]:
    """``[fn(x) for x in items]``: the first item in this thread, the others on the shared
    pool when there are workers to spare (this thread works instead of waiting: one hand-off
    fewer). Every item has finished, or failed, when it returns or raises."""
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    futures = [_pool().submit(fn, x) for x in items[1:]]
    try:
        first = fn(items[0])
    finally:
        wait(futures)
    return [first, *(f.result() for f in futures)]


def _call(job: Callable[[], _R]) -> _R:
    return job()
