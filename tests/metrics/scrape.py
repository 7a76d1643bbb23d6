"""Scrape a metrics endpoint over HTTP and parse it with prometheus-client's own parser."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample at ``url``: (sample name, labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """One sample's value (None: not exported)."""
    return samples.get((name, frozenset(labels.items())))


def metrics_url(proc: subprocess.Popen[str], lines: list[str]) -> str:
    """The URL a ``--metrics-port 0`` process logged at start (its stderr lines kept)."""
    assert proc.stderr is not None
    while True:
        line = proc.stderr.readline()
        assert line, "the process ended before serving metrics:\n" + "".join(lines)
        lines.append(line)
        found = re.search(r"metrics at (http://\S+/metrics)", line)
        if found:
            return found.group(1)


def scrape_until(url: str, done: Callable[[Samples], bool], timeout_s: float = 60.0) -> Samples:
    """Scrape until ``done`` holds for what was scraped (or fail after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        samples = scrape(url)
        if done(samples):
            return samples
        assert time.monotonic() < deadline, f"timed out; last scrape: {samples}"
        time.sleep(0.1)
