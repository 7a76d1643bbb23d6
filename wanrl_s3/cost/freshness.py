"""How old the prices behind an estimate are, and the one-line warning when they are stale.

Prices move (B2 repriced on 2026-05-01), so an entry read more than
:data:`STALE_AFTER_MONTHS` months before the day of the estimate is flagged.
``today`` is always passed in: the check is a pure function of the table and a
date, which keeps it testable and keeps the clock in the CLI.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from datetime import date

from .prices import PriceBook, Provenance

#: A price entry checked longer ago than this is stale: the estimate warns, `prices` marks it.
STALE_AFTER_MONTHS = 6


def months_later(day: date, months: int) -> date:
    """The same day of the month ``months`` later, clamped to the month's last day."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def is_stale(provenance: Provenance, today: date, months: int = STALE_AFTER_MONTHS) -> bool:
    """True when the entry was read more than ``months`` months before ``today``."""
    return months_later(provenance.read_on, months) < today


def stale_entries(book: PriceBook, keys: Iterable[str], today: date) -> list[tuple[str, date]]:
    """(key, read_on) for each named entry older than six months, in the order given."""
    entries = book.entries()
    return [(k, entries[k].read_on) for k in keys if is_stale(entries[k], today)]


def stale_warning(book: PriceBook, keys: Iterable[str], today: date) -> str | None:
    """One line naming every stale entry an estimate used, or None when all are fresh."""
    stale = stale_entries(book, keys, today)
    if not stale:
        return None
    listed = ", ".join(f"{key} (read {read_on.isoformat()})" for key, read_on in stale)
    return (
        f"prices older than {STALE_AFTER_MONTHS} months: {listed}; check them against their "
        "sources ('wanrl-s3 prices') or pass your own with --prices FILE"
    )
