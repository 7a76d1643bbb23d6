"""Byte units, the checks every config and formula applies to its numbers, and the way a
count or a size reads in a line a person reads, in one place.

A config field or a formula input is a count (workers, versions, attempts) or a
quantity with a unit in its name (``_s``, ``_mbps``, ``_gb``). Each check below
raises :class:`~wanrl_s3.errors.UsageError` with one line that names the field,
says what it must be and shows the value it got, so the caller knows what to fix.
Counts must be real integers (``True`` and ``3.0`` are refused: a float that
happens to be whole is usually a unit mix-up), quantities finite numbers.
Every command and log says "1 worker" and "27.0 KiB" through :func:`count` and
:func:`binary_bytes`, so none says "1 workers" or "0.0 MiB".
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


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "worker")`` is "1 worker", ``count(2, "worker")`` "2 workers"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def binary_bytes(n: float) -> str:
    """A byte count in the largest binary unit below it: "812 B", "27.0 KiB", "1.5 GiB"."""
    if abs(n) < KiB:
        return f"{n:,.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= KiB
        if abs(n) < KiB or unit == "GiB":
            break
    return f"{n:,.1f} {unit}"
