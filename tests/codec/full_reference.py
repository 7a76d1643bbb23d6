"""A slow, literal reading of docs/full-format.md: a reader and a writer to check the codec.

Nothing here shares code with ``wanrl_s3.codec.full``: if the page and the
codec disagree, the tests that use this module fail. Errors are plain
ValueErrors; the tests only ask whether both readers refuse the same things.
"""

from __future__ import annotations

import struct

import zstandard

MAGIC = b"WRSF"
SIZES = {1: 2, 2: 2, 3: 4, 4: 8, 5: 1, 6: 2, 7: 4, 8: 8, 9: 1, 10: 1}  # dtype id -> bytes
NAMES = {1: "BF16", 2: "F16", 3: "F32", 4: "F64", 5: "I8", 6: "I16", 7: "I32", 8: "I64",
         9: "U8", 10: "BOOL"}  # fmt: skip


def decode(payload: bytes) -> tuple[str, int, bytes]:
    """(dtype name, element count, the tensor's bytes), or ValueError naming the broken rule."""
    if len(payload) < 24:
        raise ValueError("shorter than the header")
    magic, version, coding, dtype, width, count, block, reserved = struct.unpack(
        "<4sBBBBQII", payload[:24]
    )
    if magic != MAGIC or version != 1 or coding not in (0, 1) or reserved != 0:
        raise ValueError("magic, version, coding or reserved")
    if dtype not in SIZES or SIZES[dtype] != width or count * width >= 2**62:
        raise ValueError("dtype, width or count")
    if coding == 0:
        if block != 0 or len(payload) != 24 + count * width:
            raise ValueError("raw length")
        return NAMES[dtype], count, payload[24:]
    if count < 1 or not 1 <= block <= 2**24:
        raise ValueError("count or block")
    blocks = (count + block - 1) // block
    table_end = 24 + 4 * blocks * width
    if len(payload) < table_end:
        raise ValueError("table")
    lengths = struct.unpack(f"<{blocks * width}I", payload[24:table_end])
    if len(payload) != table_end + sum(lengths):
        raise ValueError("total length")
    out = bytearray()
    offset = table_end
    for b in range(blocks):
        n = min(block, count - b * block)
        elements = bytearray(n * width)
        for j in range(width):
            length = lengths[b * width + j]
            section = payload[offset : offset + length]
            offset += length
            elements[j::width] = _plane(section, n)
        out += elements
    return NAMES[dtype], count, bytes(out)


def _plane(section: bytes, n: int) -> bytes:
    if not 1 <= len(section) <= n:
        raise ValueError("section length")
    if len(section) == n:
        return section
    try:
        if zstandard.frame_content_size(section) != n:
            raise ValueError("frame content size")
        plane = zstandard.ZstdDecompressor().decompress(section, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise ValueError(f"frame: {exc}") from exc
    if len(plane) != n:
        raise ValueError("frame decodes to the wrong size")
    return plane


def encode(dtype_id: int, data: bytes, block: int, *, raw_planes: tuple[int, ...] = ()) -> bytes:
    """A coding 1 payload by the page's rules with choices the codec does not make: any block
    size, checksummed frames at level 19, the planes in ``raw_planes`` left raw."""
    width = SIZES[dtype_id]
    count = len(data) // width
    lengths, sections = [], []
    for start in range(0, count, block):
        chunk = data[start * width : (start + block) * width]
        for j in range(width):
            plane = chunk[j::width]
            frame = zstandard.ZstdCompressor(level=19, write_checksum=True).compress(plane)
            section = plane if j in raw_planes or len(frame) >= len(plane) else frame
            lengths.append(len(section))
            sections.append(section)
    header = struct.pack("<4sBBBBQII", MAGIC, 1, 1, dtype_id, width, count, block, 0)
    return header + struct.pack(f"<{len(lengths)}I", *lengths) + b"".join(sections)
