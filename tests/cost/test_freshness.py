"""Price staleness: an entry read more than six months before 'today' is flagged, today injected."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from wanrl_s3.cost.freshness import is_stale, months_later, stale_entries, stale_warning
from wanrl_s3.cost.prices import PriceBook


@pytest.mark.parametrize(
    ("day", "months", "expected"),
    [
        (date(2026, 6, 3), 6, date(2026, 12, 3)),
        (date(2026, 8, 31), 6, date(2027, 2, 28)),  # clamped to the month's last day
        (date(2027, 8, 31), 6, date(2028, 2, 29)),  # a leap year
        (date(2026, 12, 3), 1, date(2027, 1, 3)),
    ],
)
def test_months_later(day: date, months: int, expected: date) -> None:
    assert months_later(day, months) == expected


def test_six_months_to_the_day_is_still_fresh(prices: PriceBook) -> None:
    aws = dataclasses.replace(prices.provider("aws").provenance, read_on=date(2026, 6, 3))
    assert not is_stale(aws, today=date(2026, 12, 3))
    assert is_stale(aws, today=date(2026, 12, 4))


def test_the_shipped_table_is_fresh_at_recording_and_stale_after_six_months(
    prices: PriceBook,
) -> None:
    used = ("storage.aws", "cdns.cloudfront", "gpus")
    assert stale_entries(prices, used, today=date(2026, 12, 3)) == []
    assert stale_warning(prices, used, today=date(2026, 12, 3)) is None
    later = date(2027, 6, 4)  # aws and cloudfront read 2026-12-03, gpus 2026-12-02
    assert stale_entries(prices, used, today=later) == [
        ("storage.aws", date(2026, 12, 3)),
        ("cdns.cloudfront", date(2026, 12, 3)),
        ("gpus", date(2026, 12, 2)),
    ]
    assert stale_entries(prices, used, today=date(2027, 6, 3)) == [("gpus", date(2026, 12, 2))]
    warning = stale_warning(prices, used, today=later)
    assert warning is not None and "\n" not in warning
    assert warning.startswith(
        "prices older than 6 months: storage.aws (read 2026-12-03), cdns.cloudfront (read "
        "2026-12-03), gpus (read 2026-12-02); check them"
    )
