"""The shared validators: what they accept, what they refuse, and the one line they say."""

from __future__ import annotations

import math

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.units import GiB, KiB, MiB, require_int, require_non_negative, require_positive


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
