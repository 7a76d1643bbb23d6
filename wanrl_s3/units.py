"""Byte units and the checks every config and formula applies to its numbers, in one place.

A config field or a formula input is a count (workers, versions, attempts) or a
quantity with a unit in its name (``_s``, ``_mbps``, ``_gb``). Each check below
raises :class:`~wanrl_s3.errors.UsageError` with one line that names the field,
says what it must be and shows the value it got, so the caller knows what to fix.
Counts must be real integers (``True`` and ``3.0`` are refused: a float that
happens to be whole is usually a unit mix-up), quantities finite numbers.
"""

from __future__ import annotations

import math

from .errors import UsageError

KiB = 2**10
MiB = 2**20
GiB = 2**30


def require_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an integer >= ``minimum``; bools and floats are refused by name."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def require_positive(name: str, value: float) -> float:
    """``value`` as a float > 0; zero, negatives, NaN, infinities and non-numbers are refused."""
    if not (_finite(value) and value > 0):
        raise UsageError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def require_non_negative(name: str, value: float) -> float:
    """Like :func:`require_positive` but admits zero (a grace period, a free transfer)."""
    if not (_finite(value) and value >= 0):
        raise UsageError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _finite(value: object) -> bool:
    """A real number (not a bool, not a string) that is neither NaN nor infinite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value)
