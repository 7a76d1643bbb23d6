"""Counts and sizes as the command lines and logs print them."""

from __future__ import annotations

import pytest

from wanrl_s3.humanize import binary_bytes, count


def test_count_agrees_with_its_number() -> None:
    assert [count(n, "worker") for n in (0, 1, 2)] == ["0 workers", "1 worker", "2 workers"]
    assert count(1, "version") == "1 version" and count(3, "stale upload") == "3 stale uploads"
    assert count(2, "entry", "entries") == "2 entries"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (812, "812 B"),
        (1023, "1,023 B"),
        (1024, "1.0 KiB"),
        (27 * 1024, "27.0 KiB"),
        (3 * 2**20 // 2, "1.5 MiB"),
        (16 * 2**30, "16.0 GiB"),
        (3 * 2**40, "3,072.0 GiB"),
    ],
)
def test_binary_bytes_never_rounds_a_small_size_to_zero(n: int, text: str) -> None:
    assert binary_bytes(n) == text
