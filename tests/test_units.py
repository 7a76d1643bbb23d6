"""The shared validators (what they accept, what they refuse, the one line they say) and
how counts and sizes read."""

from __future__ import annotations

import math

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.units import (
    GiB,
    KiB,
    MiB,
    binary_bytes,
    count,
    require_int,
    require_non_negative,
    require_positive,
)


def test_byte_units() -> None:
    assert (KiB, MiB, GiB) == (1024, 1024**2, 1024**3)


@pytest.mark.parametrize("value", [0, -3, True, 3.0, "3", None])
def test_require_int_refuses_non_integers_and_small_ones(value: object) -> None:
    with pytest.raises(UsageError) as caught:
        require_int("keep_versions", value)
    assert str(caught.value) == f"keep_versions must be an integer >= 1, got {value!r}"


def test_require_int_keeps_the_value_and_honours_the_minimum() -> None:
    assert require_int("version", 0, minimum=0) == 0
    assert require_int("workers", 12) == 12
    with pytest.raises(UsageError, match="version must be an integer >= 0, got -1"):
        require_int("version", -1, minimum=0)


@pytest.mark.parametrize("value", [0, -1.5, math.nan, math.inf, -math.inf, True, "2", None])
def test_require_positive_refuses_what_is_not_a_positive_finite_number(value: object) -> None:
    with pytest.raises(UsageError) as caught:
        require_positive("poll_interval_s", value)  # type: ignore[arg-type]
    assert str(caught.value) == f"poll_interval_s must be a positive finite number, got {value!r}"


def test_require_non_negative_admits_zero_only_in_addition() -> None:
    assert require_non_negative("grace_s", 0) == 0.0
    assert isinstance(require_positive("t_train_s", 1500), float)
    for value in (-0.001, math.nan, math.inf):
        with pytest.raises(UsageError, match=r"^grace_s must be a finite number >= 0, got"):
            require_non_negative("grace_s", value)


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
