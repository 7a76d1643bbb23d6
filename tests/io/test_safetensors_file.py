"""Reading .safetensors headers (io/safetensors_file.py): what breaks the format is refused.

A header is JSON written by anyone; Python's parser and ``int()`` are lenient
where the format is not: a shape given as a string of digits, a float or a
boolean would become another shape, and a tensor named twice would be read as
its last entry here and perhaps its first elsewhere. Each is one UsageError
naming the file and what is wrong, before any tensor is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.io.safetensors_file import SafetensorsFile, write_file

ONE = b"\0\0\x80\x3f"  # 1.0 as little-endian F32


def by_hand(path: Path, header_text: str, data: bytes = ONE) -> Path:
    """A .safetensors file whose header is exactly ``header_text``."""
    header = header_text.encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    return path


def entry(shape: object = (1,), offsets: object = (0, 4), dtype: object = "F32") -> str:
    return json.dumps({"dtype": dtype, "shape": shape, "data_offsets": offsets})


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ('{"w": ' + entry(shape="1") + "}", "shape must be a list of integers, got '1'"),
        ('{"w": ' + entry(shape=[1.0]) + "}", "shape must be a list of integers, got [1.0]"),
        ('{"w": ' + entry(shape=[True]) + "}", "shape must be a list of integers, got [True]"),
        ('{"w": ' + entry(shape=1) + "}", "shape must be a list of integers, got 1"),
        ('{"w": ' + entry(offsets=["0", 4]) + "}", "data_offsets must be a list of 2 integers"),
        ('{"w": ' + entry(offsets=[0, 4, 8]) + "}", "data_offsets must be a list of 2 integers"),
        ('{"w": ' + entry(dtype=["F32"]) + "}", "dtype must be a string"),
        ('{"w": ' + entry() + ', "w": ' + entry() + "}", "'w' appears twice in the header"),
        (
            '{"__metadata__": {"a": "1", "a": "2"}, "w": ' + entry() + "}",
            "'a' appears twice in the header",
        ),
        ("[" * 100_000 + "]" * 100_000, "nests too deep"),
    ],
    ids=[
        "shape-string", "shape-float", "shape-bool", "shape-number", "offsets-string",
        "offsets-three", "dtype-list", "name-twice", "metadata-key-twice", "nested-100000",
    ],
)  # fmt: skip
def test_a_header_that_breaks_the_format_is_one_usage_error(
    tmp_path: Path, header: str, needle: str
) -> None:
    path = by_hand(tmp_path / "bad.safetensors", header)
    with pytest.raises(UsageError) as caught:
        SafetensorsFile(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and needle in message and "\n" not in message


def test_names_are_opaque_strings_dots_and_slashes_included(tmp_path: Path) -> None:
    """wanrl-s3 never makes a path or a key of a tensor name: '..' and '/' are characters."""
    tensors = {"../../escape": np.ones(3, np.float32), "a..b/c": np.zeros(2, np.int32)}
    path = write_file(tmp_path / "dots.safetensors", tensors)
    back = dict(SafetensorsFile(path).items())
    assert set(back) == set(tensors)
    assert all(np.array_equal(back[n], tensors[n]) for n in tensors)
