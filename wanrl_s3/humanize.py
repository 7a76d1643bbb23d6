"""Numbers as a person reads them in a log or a report line: counts with their noun, sizes.

Kept in one place so that every command says "1 worker" and "27.0 KiB" the same
way, and none says "1 workers" or "0.0 MiB".
"""

from __future__ import annotations

from .units import KiB


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
