"""Lossless coding of whole tensors: byte planes, the low-entropy ones through zstd.

A full snapshot is what every new worker pulls, so its size is the floor of a
fleet start. The bits of a trained bf16 weight are not equally random: its
high byte (sign and the top seven exponent bits) carries about 2.7 bits of
information in 8, the low byte (the exponent's last bit and the mantissa)
nearly 8 in 8. Splitting each element into byte planes and entropy-coding the
planes that compress stores bf16 weights in about 10.7 bits each (0.67x),
bit for bit, for every dtype: nothing is interpreted, only regrouped.

The byte format is specified in ``docs/full-format.md``. In short: a 24-byte
header, and for coding 1 a table of section lengths, then per block of
``block_elements`` elements one section per byte plane, each either the
plane's bytes as they are or one zstd frame. Why these choices, measured on
bf16 weights (``benchmarks/full_codec.py``, ``docs/benchmarks.md``):

- Byte planes, not an exponent/sign+mantissa split: the split codes 0.1 bit
  per weight less (the exponent's last bit is not quite random) but takes
  three more passes to put the bits back: 17-25 % slower decodes here.
- zstd with match finding all but off: exponent bytes are close to
  independent, so zstd's Huffman stage does the work and short LZ matches
  only cost bits and time (level 1 defaults: 2.94 bits per high byte and
  half the decode speed in zstd's own benchmark; these parameters: 2.74 bits,
  order-0 entropy 2.7).
- Planes that do not compress (the mantissa byte) are stored as they are,
  decided once per tensor on a sample, so the encoder does not spend zstd's
  time on them and the decoder reads them straight from the payload.
- Blocks: each decodes on its own, so blocks run on all cores, the planes of
  one block stay in cache while they are put back together, and a reader can
  decode the blocks that have arrived while later ones are in flight.

Tensors under ``MIN_CODED_BYTES`` and tensors that do not shrink by
``1 - TENSOR_KEEP`` (random bytes, most int8) are stored raw (coding 0).
Integrity is the manifest's job: its BLAKE3 hash covers the decoded bytes.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

import numpy as np
import zstandard

from ..errors import UsageError, VerificationError
from ..format.dtypes import DTYPES, DType
from .delta import _parallel_map, _thread_count

MAGIC = b"WRSF"
FORMAT_VERSION = 1
#: A full payload's coding: the tensor's bytes as they are (docs/full-format.md).
CODING_RAW = 0
#: A full payload's coding: byte planes, each compressed on its own (docs/full-format.md).
CODING_PLANES = 1
_HEADER = struct.Struct("<4sBBBBQII")  # magic version coding dtype width count block reserved
HEADER_BYTES = _HEADER.size  # 24
_LENGTH = np.dtype("<u4")

# Stable ids for the header's dtype byte (docs/full-format.md): never renumber.
DTYPE_IDS: dict[str, int] = {
    "BF16": 1,
    "F16": 2,
    "F32": 3,
    "F64": 4,
    "I8": 5,
    "I16": 6,
    "I32": 7,
    "I64": 8,
    "U8": 9,
    "BOOL": 10,
}
_DTYPE_NAMES = {v: k for k, v in DTYPE_IDS.items()}

BLOCK_ELEMENTS = 1 << 18  # at most 512 KiB of bf16 per block: its planes and output fit in L2
SPLIT_ELEMENTS = 1 << 16  # a tensor of twice this or more gets at least two blocks
MAX_BLOCK_ELEMENTS = 1 << 24  # readers refuse larger blocks (bounds one section's size)
MIN_CODED_BYTES = 4096  # smaller tensors are stored raw: a few bytes saved are not worth a frame
SAMPLE_ELEMENTS = 1 << 16  # a plane is tried on this many elements before it is coded
PLANE_KEEP = 0.95  # ... and coded only if the sample shrinks to at most this fraction
TENSOR_KEEP = 0.98  # the coded payload must be at most this fraction of raw, else raw

# Few, long matches only: planes of exponent bytes are near-i.i.d.; the Huffman stage
# codes them, and 128 KiB windows keep each frame's tables local to its block.
_PARAMS = zstandard.ZstdCompressionParameters.from_level(
    1, min_match=7, hash_log=6, chain_log=6, search_log=1, window_log=17, write_content_size=1
)
_local = threading.local()


@dataclass(frozen=True)
class FullPayload:
    """An encoded tensor: ``data`` is the self-describing byte string that travels."""

    data: memoryview  # read-only bytes, over a numpy buffer (built in place, no copy)
    coding: int  # CODING_RAW or CODING_PLANES
    dtype: str  # safetensors name
    count: int  # elements

    def __post_init__(self) -> None:
        if self.coding not in (CODING_RAW, CODING_PLANES) or self.dtype not in DTYPE_IDS:
            raise UsageError(f"FullPayload: coding {self.coding}, dtype {self.dtype!r}")

    @property
    def raw_bytes(self) -> int:
        """The tensor's size uncoded: ``count`` elements at the dtype's width, in bytes."""
        return self.count * DTYPES[self.dtype].itemsize

    @property
    def ratio(self) -> float:
        """Stored bytes over raw bytes (header included; 1.0 for an empty tensor)."""
        return len(self.data) / self.raw_bytes if self.raw_bytes else 1.0


@dataclass(frozen=True)
class FullHeader:
    """A payload's header and section table, checked against the payload's length."""

    coding: int
    dtype: str
    width: int  # bytes per element
    count: int
    block_elements: int  # 0 for coding 0
    sections: np.ndarray  # int64 lengths, block-major (blocks x width); empty for coding 0

    @property
    def blocks(self) -> int:
        """How many blocks the section table describes (0 for coding 0, which has none)."""
        return self.sections.shape[0] if self.sections.ndim == 2 else 0

    @property
    def body_offset(self) -> int:
        """Where the first section (coding 1) or the raw bytes (coding 0) start."""
        return HEADER_BYTES + self.sections.size * _LENGTH.itemsize


# --------------------------------------------------------------------------- API


def encode_full(
    bits: np.ndarray,
    dtype: str,
    *,
    threads: int | None = None,
    block_elements: int | None = None,
) -> FullPayload:
    """Encode a whole tensor losslessly; the result decodes to exactly these bits.

    ``bits`` is the tensor's data in any C-order array whose item size is the
    dtype's (a bf16 array or its uint16 view alike); ``dtype`` its safetensors
    name (``BF16``, ``F32`` ...). Falls back to raw bytes (coding 0) when coding
    does not pay. ``threads`` defaults to the usable cores (at most 8).
    ``block_elements`` defaults to :func:`block_size`'s choice.
    """
    dt = _dtype(dtype)
    flat = _flat_bits(bits, dt)
    workers = _thread_count(threads)
    block = block_size(flat.size) if block_elements is None else block_elements
    if not 1 <= block <= MAX_BLOCK_ELEMENTS:
        raise UsageError(f"block_elements {block} not in 1..{MAX_BLOCK_ELEMENTS}")
    raw = flat.size * dt.itemsize
    if raw >= MIN_CODED_BYTES:
        coded = _coded_planes(flat, dt.itemsize)
        sink = _encode_planes(flat, dt, coded, block, workers) if any(coded) else None
        if sink is not None:
            return FullPayload(sink.data.toreadonly(), CODING_PLANES, dt.name, flat.size)
    sink = _sink(HEADER_BYTES + raw, _header(CODING_RAW, dt, flat.size, 0))
    sink[HEADER_BYTES:] = flat.view(np.uint8)
    return FullPayload(sink.data.toreadonly(), CODING_RAW, dt.name, flat.size)


def block_size(count: int) -> int:
    """Elements per block for a tensor of ``count``: equal blocks of at most
    ``BLOCK_ELEMENTS``, an even number of them when there are several (two from
    ``2 * SPLIT_ELEMENTS`` up), so that two or four threads get equal shares.

    Fixed blocks of 2^18 would cut a tensor of 409,600 bf16 elements 64/36, and two
    threads would decode it at 1.1x one thread's speed.
    """
    blocks = -(-count // BLOCK_ELEMENTS)
    if count >= 2 * SPLIT_ELEMENTS:
        blocks = max(2, blocks + blocks % 2)
    return max(1, -(-count // max(1, blocks)))


def decode_full(
    payload: FullPayload | bytes | bytearray | memoryview,
    out: np.ndarray,
    *,
    dtype: str | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Decode ``payload`` straight into ``out`` and return ``out``.

    ``out`` is the destination tensor: a writeable C-contiguous array with the
    payload's element count and item size (any dtype of that width: the bf16
    array itself or its uint16 view). ``dtype``, when given (the manifest's),
    must match the payload's. The header and section table are validated
    before anything is written; a section found corrupt while decoding raises
    VerificationError with ``out`` partly written: discard it.
    """
    data = _payload_bytes(payload)
    head = read_full_header(data)
    if dtype is not None and dtype != head.dtype:
        raise VerificationError(f"full payload holds {head.dtype}, the manifest says {dtype}")
    target = _out_bits(out, head)
    view = memoryview(data)
    if head.coding == CODING_RAW:
        target[...] = np.frombuffer(view, np.uint8, head.count * head.width, head.body_offset)
        return out
    offsets = _section_offsets(head)
    _check_frames(view, head, offsets)
    groups = _shares(head.blocks, _thread_count(threads))
    _parallel_map(lambda g: _decode_blocks(view, head, offsets, target, g), groups, len(groups))
    return out


def read_full_header(data: bytes | bytearray | memoryview) -> FullHeader:
    """Parse and check a payload's header and section table against its length."""
    size = len(data)
    _check(size >= HEADER_BYTES, f"full payload is {size} bytes, shorter than its header")
    magic, version, coding, dtype_id, width, count, block, reserved = _HEADER.unpack_from(data)
    _check(magic == MAGIC, f"full payload: bad magic {magic!r}, expected {MAGIC!r}")
    _check(version == FORMAT_VERSION, f"full payload: format version {version} is not supported")
    _check(coding in (CODING_RAW, CODING_PLANES), f"full payload: unknown coding {coding}")
    _check(dtype_id in _DTYPE_NAMES, f"full payload: unknown dtype id {dtype_id}")
    dt = DTYPES[_DTYPE_NAMES[dtype_id]]
    _check(width == dt.itemsize, f"full payload: width {width} for {dt.name} ({dt.itemsize})")
    _check(reserved == 0, "full payload: reserved header field is not 0")
    _check(count * width < 1 << 62, f"full payload: {count} elements is beyond any tensor")
    if coding == CODING_RAW:
        _check(block == 0, "full payload: coding 0 with a block size")
        _check(size == HEADER_BYTES + count * width, _length_message(size, count * width))
        return FullHeader(coding, dt.name, width, count, 0, np.empty((0, width), np.int64))
    _check(count > 0, "full payload: coding 1 for an empty tensor")
    _check(1 <= block <= MAX_BLOCK_ELEMENTS, f"full payload: block of {block} elements")
    blocks = -(-count // block)
    table = blocks * width * _LENGTH.itemsize
    _check(size >= HEADER_BYTES + table, f"full payload is {size} bytes, its table {table}")
    sections = np.frombuffer(data, _LENGTH, blocks * width, HEADER_BYTES).astype(np.int64)
    sections = sections.reshape(blocks, width)
    plane = np.full(blocks, block, np.int64)
    plane[-1] = count - (blocks - 1) * block
    _check(bool((sections > 0).all()), "full payload: an empty section")
    _check(bool((sections <= plane[:, None]).all()), "full payload: a section longer than raw")
    body = int(sections.sum())
    _check(size == HEADER_BYTES + table + body, _length_message(size, table + body))
    return FullHeader(coding, dt.name, width, count, block, sections)


# -------------------------------------------------------------------- encoding


def _coded_planes(flat: np.ndarray, width: int) -> tuple[bool, ...]:
    """Which byte planes to code: those whose sample, from the middle, zstd shrinks enough."""
    start = max(0, flat.size // 2 - SAMPLE_ELEMENTS // 2)
    sample = flat[start : start + SAMPLE_ELEMENTS]
    compressor = _compressor()
    plane = np.empty(sample.size, np.uint8)
    coded = []
    for j in range(width):
        _split(sample, j, plane)
        coded.append(len(compressor.compress(plane.data)) <= PLANE_KEEP * plane.size)
    return tuple(coded)


def _encode_planes(
    flat: np.ndarray, dt: DType, coded: tuple[bool, ...], block: int, workers: int
) -> np.ndarray | None:
    """The coding 1 payload, or None when it would not be at most TENSOR_KEEP of raw.

    Two passes over the blocks, each spread over the workers: compress the
    coded planes (into frames), then, once every section's length and so its
    offset is known, write the payload in place: frames copied, raw planes
    split straight into it. Raw planes are never held anywhere else, and
    nothing is assembled when the tensor is about to fall back to raw.
    """
    blocks = -(-flat.size // block)
    groups = _shares(blocks, workers)
    frames = [f for part in _parallel_map(lambda g: _compress_blocks(flat, block, coded, g),
                                          groups, len(groups)) for f in part]  # fmt: skip
    sizes = np.minimum(flat.size - np.arange(blocks) * block, block)
    lengths = np.array([len(f) if f else sizes[i // dt.itemsize] for i, f in enumerate(frames)])
    body = HEADER_BYTES + lengths.size * _LENGTH.itemsize
    total = body + int(lengths.sum())
    if total > TENSOR_KEEP * flat.size * dt.itemsize:
        return None
    sink = _sink(total, _header(CODING_PLANES, dt, flat.size, block))
    sink[HEADER_BYTES:body] = lengths.astype(_LENGTH).view(np.uint8)
    starts = (np.cumsum(lengths) - lengths + body).reshape(blocks, dt.itemsize)
    _parallel_map(lambda g: _write_blocks(sink, flat, block, frames, starts, g), groups,
                  len(groups))  # fmt: skip
    return sink


def _compress_blocks(
    flat: np.ndarray, block: int, coded: tuple[bool, ...], indices: range
) -> list[bytes | None]:
    """Per block and plane: its zstd frame when coded and smaller than raw, else None."""
    compressor = _compressor()
    scratch = np.empty(min(block, flat.size), np.uint8)
    frames: list[bytes | None] = []
    for b in indices:
        part = flat[b * block : (b + 1) * block]
        plane = scratch[: part.size]
        for j, try_zstd in enumerate(coded):
            frame = None
            if try_zstd:
                _split(part, j, plane)
                frame = compressor.compress(plane.data)
            frames.append(frame if frame and len(frame) < part.size else None)
    return frames


def _write_blocks(
    sink: np.ndarray,
    flat: np.ndarray,
    block: int,
    frames: list[bytes | None],
    starts: np.ndarray,
    indices: range,
) -> None:
    width = starts.shape[1]
    for b in indices:
        part = flat[b * block : (b + 1) * block]
        for j in range(width):
            start, frame = int(starts[b, j]), frames[b * width + j]
            if frame is None:
                _split(part, j, sink[start : start + part.size])
            else:
                sink[start : start + len(frame)] = np.frombuffer(frame, np.uint8)


def _split(part: np.ndarray, j: int, out: np.ndarray) -> None:
    """Byte plane ``j`` of ``part``'s elements into ``out`` (plane 0 by a truncating copy,
    twice as fast here as a shift by 0)."""
    if j == 0:
        np.copyto(out, part, casting="unsafe")
    else:
        np.right_shift(part, 8 * j, out=out, casting="unsafe")


def _header(coding: int, dt: DType, count: int, block: int) -> bytes:
    return _HEADER.pack(MAGIC, FORMAT_VERSION, coding, DTYPE_IDS[dt.name], dt.itemsize, count,
                        block, 0)  # fmt: skip


def _sink(total: int, header: bytes) -> np.ndarray:
    """The payload's buffer, header written. numpy's, not a bytearray: a large numpy buffer
    gets huge pages, and a bytearray is zeroed page by page first (measured here: 85-120 ms
    for 66 MB against 15-30 ms to allocate and fill numpy's).
    """
    sink = np.empty(total, np.uint8)
    sink[:HEADER_BYTES] = np.frombuffer(header, np.uint8)
    return sink


def _compressor() -> zstandard.ZstdCompressor:
    """One compressor per thread: a zstd context is not safe to share."""
    compressor = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = _local.compressor = zstandard.ZstdCompressor(compression_params=_PARAMS)
    return compressor


# -------------------------------------------------------------------- decoding


def _section_offsets(head: FullHeader) -> np.ndarray:
    """Start of every section in the payload, same (blocks, width) shape as the table."""
    ends = np.cumsum(head.sections.reshape(-1)) + head.body_offset
    return (ends - head.sections.reshape(-1)).reshape(head.sections.shape)


def _check_frames(view: memoryview, head: FullHeader, offsets: np.ndarray) -> None:
    """Every coded section must declare exactly its plane's size, before anything is decoded."""
    sizes = _plane_sizes(head)
    for b, j in zip(*np.nonzero(head.sections < sizes[:, None]), strict=True):
        start, length = int(offsets[b, j]), int(head.sections[b, j])
        try:
            size = zstandard.frame_content_size(view[start : start + length])
        except zstandard.ZstdError as exc:
            raise VerificationError(
                f"full payload: block {b} plane {j} is not a zstd frame: {exc}"
            ) from exc
        _check(size == sizes[b], f"full payload: block {b} plane {j} declares {size} bytes, "
                                 f"expected {sizes[b]}")  # fmt: skip


def _plane_sizes(head: FullHeader) -> np.ndarray:
    sizes = np.full(head.blocks, head.block_elements, np.int64)
    sizes[-1] = head.count - (head.blocks - 1) * head.block_elements
    return sizes


def _decode_blocks(
    view: memoryview, head: FullHeader, offsets: np.ndarray, out: np.ndarray, indices: range
) -> None:
    """Put these blocks back together, highest plane first: out = (out << 8) | plane."""
    decompressor = _decompressor()
    block, top = head.block_elements, head.width - 1
    # x * 256, not x << 8: numpy's widening shift runs at 2/3 of the multiply's speed here
    shift = out.dtype.type(256 if top else 1)
    for b in indices:
        target = out[b * block : (b + 1) * block]
        for j in range(top, -1, -1):
            plane = _plane(view, int(offsets[b, j]), int(head.sections[b, j]), target.size,
                           decompressor, (b, j))  # fmt: skip
            if j == top:  # the first shift comes free with the widening copy
                np.multiply(plane, shift, out=target, dtype=target.dtype)
                continue
            if j < top - 1:
                target <<= np.uint8(8)
            np.bitwise_or(target, plane, out=target)


def _plane(
    view: memoryview,
    start: int,
    length: int,
    size: int,
    decompressor: zstandard.ZstdDecompressor,
    where: tuple[int, int],
) -> np.ndarray:
    """A section's plane bytes: as stored when raw, else its zstd frame's content."""
    section = view[start : start + length]
    if length == size:
        return np.frombuffer(section, np.uint8)
    try:
        content = decompressor.decompress(section, max_output_size=size, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise VerificationError(
            f"full payload: block {where[0]} plane {where[1]} is corrupt or truncated: {exc}"
        ) from exc
    if len(content) != size:
        raise VerificationError(
            f"full payload: block {where[0]} plane {where[1]} decodes to {len(content)} bytes"
        )
    return np.frombuffer(content, np.uint8)


def _decompressor() -> zstandard.ZstdDecompressor:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


# ---------------------------------------------------------------------- helpers


def _shares(blocks: int, workers: int) -> list[range]:
    """Blocks 0..blocks-1 cut into at most ``workers`` runs of consecutive blocks, as equal
    as whole blocks allow (block_size() makes the blocks equal)."""
    n = max(1, min(workers, blocks))
    return [range(blocks * i // n, blocks * (i + 1) // n) for i in range(n)]


def _dtype(name: str) -> DType:
    if name not in DTYPE_IDS:
        raise UsageError(f"dtype {name!r} is not one of {', '.join(DTYPE_IDS)}")
    return DTYPES[name]


def _flat_bits(array: np.ndarray, dt: DType) -> np.ndarray:
    """The tensor's elements as a flat C-order array of ``dt.bits`` (a view when possible)."""
    a = np.asarray(array)
    if a.dtype.itemsize != dt.itemsize:
        raise UsageError(f"{a.dtype} array ({a.dtype.itemsize}-byte items) is not {dt.name}")
    if a.dtype.byteorder == ">" and a.dtype.itemsize > 1:
        raise UsageError(f"big-endian {a.dtype}; convert to little-endian first")
    return np.ascontiguousarray(a).reshape(-1).view(dt.bits)


def _out_bits(out: np.ndarray, head: FullHeader) -> np.ndarray:
    """``out`` as a flat unsigned view that decoding may write, checked against the header."""
    if not isinstance(out, np.ndarray):
        raise UsageError(f"out must be a numpy array, not {type(out).__name__}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise UsageError("out must be a writeable C-contiguous array")
    if out.dtype.itemsize != head.width or out.size != head.count:
        raise VerificationError(
            f"full payload holds {head.count} {head.dtype} elements but out is "
            f"{out.dtype}[{out.size}]: wrong tensor, shape or dtype"
        )
    flat = out.reshape(-1)
    return flat.view(np.uint8) if head.coding == CODING_RAW else flat.view(f"<u{head.width}")


def _payload_bytes(
    payload: FullPayload | bytes | bytearray | memoryview,
) -> bytes | bytearray | memoryview:
    if isinstance(payload, FullPayload):
        return payload.data
    if isinstance(payload, memoryview):
        return payload.cast("B")
    if isinstance(payload, bytes | bytearray):
        return payload
    raise UsageError(f"payload must be FullPayload or bytes, not {type(payload).__name__}")


def _length_message(size: int, body: int) -> str:
    return (
        f"full payload is {size} bytes but its header promises {HEADER_BYTES} + {body}: "
        "truncated or padded"
    )


def _check(ok: bool, message: str) -> None:
    """Raise VerificationError(message) unless ``ok``: the reader's one failure mode."""
    if not ok:
        raise VerificationError(message)
