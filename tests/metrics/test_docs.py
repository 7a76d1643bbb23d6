"""docs/operations.md's table of metrics is the list the code exports, no more, no less."""

from __future__ import annotations

import re

from tests.metrics.test_dashboard import ROOT, exported

OPERATIONS = ROOT / "docs" / "operations.md"


def documented() -> set[str]:
    section = OPERATIONS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(wanrl_s3_[a-z0-9_]+)` \|", section, flags=re.M))


def test_the_metrics_table_lists_every_exported_metric_by_its_scraped_name() -> None:
    scraped = {  # a counter is scraped as NAME_total; a histogram under its own name
        next(iter(names)) if len(names) == 1 else family for family, names in exported().items()
    }
    assert len(scraped) >= 25
    assert documented() == scraped
