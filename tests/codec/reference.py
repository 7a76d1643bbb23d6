"""A slow, literal reading of docs/delta-format.md, bit by bit, to check the codec against.

Nothing here shares code with ``wanrl_s3.codec.delta``: if the page and the
codec disagree, the tests that use this module fail.
"""

from __future__ import annotations

import struct

import zstandard

HEADER = struct.Struct("<4sBBBBQQQQ")


def bit_stream(bits: list[int]) -> bytes:
    """Bits LSB first: stream bit j is bit (j mod 8) of byte (j div 8); zero padding."""
    out = bytearray((len(bits) + 7) // 8)
    for j, bit in enumerate(bits):
        out[j // 8] |= bit << (j % 8)
    return bytes(out)


def read_bit(buf: bytes, j: int) -> int:
    return (buf[j // 8] >> (j % 8)) & 1


def rice_content(gaps: list[int], k: int) -> bytes:
    """R (k-bit fields) then U (q zero bits and a one per gap), each padded to a byte."""
    remainders = [(g >> b) & 1 for g in gaps for b in range(k)]
    unary = [bit for g in gaps for bit in [0] * (g >> k) + [1]]
    return bit_stream(remainders) + bit_stream(unary)


def byte_planes(words: list[int], width: int) -> bytes:
    """Byte 0 of every word, then byte 1 of every word, and so on."""
    return bytes(((w >> (8 * b)) & 0xFF) for b in range(width) for w in words)


def plane_word(planes: bytes, n: int, i: int, width: int) -> int:
    return sum(planes[b * n + i] << (8 * b) for b in range(width))


def payload(
    elem_bytes: int,
    elems: int,
    positions: list[int],
    xors: list[int],
    coding_param: int,
    coding: int = 1,
    **header: object,
) -> bytes:
    """A payload exactly as the page lays it out: ``coding`` 1 is Rice with k =
    ``coding_param``, 2 byte-planed gaps that many bytes wide; ``header`` overrides any
    field by name."""
    gaps = [p - q - 1 for p, q in zip(positions, [-1, *positions], strict=False)]
    content = rice_content(gaps, coding_param) if coding == 1 else byte_planes(gaps, coding_param)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress
    pos = frame(content) if positions else b""
    val = frame(byte_planes(xors, elem_bytes)) if positions else b""
    fields = {
        "magic": b"WRSD", "version": 1, "width": elem_bytes,
        "coding": coding, "param": coding_param, "total": elems, "changed": len(positions),
        "pos_len": len(pos), "val_len": len(val),
    }  # fmt: skip
    fields.update(header)
    return HEADER.pack(*fields.values()) + pos + val


def decode(data: bytes, old: list[int]) -> list[int]:
    """Apply a payload to ``old`` (a list of element values), trusting it is valid."""
    magic, version, width, coding, param, total, n, pos_len, _ = HEADER.unpack_from(data)
    assert (magic, version, total) == (b"WRSD", 1, len(old)) and coding in (1, 2)
    if n == 0:
        return list(old)
    content = zstandard.ZstdDecompressor().decompress(data[40 : 40 + pos_len])
    planes = zstandard.ZstdDecompressor().decompress(data[40 + pos_len :])
    gaps = rice_gaps(content, n, param) if coding == 1 else plane_gaps(content, n, param)
    new, position = list(old), -1
    for i, gap in enumerate(gaps):
        position += gap + 1
        new[position] ^= plane_word(planes, n, i, width)
    return new


def rice_gaps(content: bytes, n: int, k: int) -> list[int]:
    split = (n * k + 7) // 8
    remainders, unary = content[:split], content[split:]
    gaps, j = [], 0
    for i in range(n):
        quotient = 0
        while not read_bit(unary, j):
            quotient, j = quotient + 1, j + 1
        j += 1
        remainder = sum(read_bit(remainders, i * k + b) << b for b in range(k))
        gaps.append(quotient << k | remainder)
    return gaps


def plane_gaps(content: bytes, n: int, width: int) -> list[int]:
    assert len(content) == n * width
    return [plane_word(content, n, i, width) for i in range(n)]
