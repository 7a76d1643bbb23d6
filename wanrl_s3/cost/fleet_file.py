"""The fleet file: one row per rollout host, as CSV or JSON (docs/sizing-and-cost.md).

CSV, with a header line naming the columns, in any order::

    name,downlink_mbps,uplink_mbps,rtt_ms,region
    home-1,80,20,45,eu-west-1

JSON, the same fields per worker::

    {"workers": [{"name": "home-1", "downlink_mbps": 80, "uplink_mbps": 20,
                  "rtt_ms": 45, "region": "eu-west-1"}]}

``downlink_mbps``, ``uplink_mbps`` (Mbit/s, > 0) and ``rtt_ms`` (>= 0) are required.
``rtt_ms`` is a request's round trip to the worker's bucket as the worker sees it: the
link's round trip plus the store's time to answer (a HEAD's, as ``--from-status``
reads it), not a ping, which leaves out the answer time paid on every request.
``name`` (default ``worker-<n>``, counting rows from 1), ``region`` and
``install_mb_per_s`` (verify and install rate, MB/s) are optional. Anything else
is refused, with the row and the field named, so a misspelt column never silently
becomes a default. Parsing is pure: the caller reads the file.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from .fleet import FleetLinks, WorkerLink

REQUIRED = ("downlink_mbps", "uplink_mbps", "rtt_ms")
OPTIONAL = ("name", "region", "install_mb_per_s")
NUMBERS = ("downlink_mbps", "uplink_mbps", "rtt_ms", "install_mb_per_s")
MAX_WORKERS = 100_000


def parse_fleet(text: str, source: str) -> FleetLinks:
    """A fleet from ``text``: JSON if it starts with ``{``, else CSV; ``source`` names it."""
    rows = _json_rows(text, source) if text.lstrip().startswith("{") else _csv_rows(text, source)
    if not rows:
        raise UsageError(f"{source}: no workers (one row per rollout host)")
    if len(rows) > MAX_WORKERS:
        raise UsageError(f"{source}: {len(rows)} workers, more than the {MAX_WORKERS} allowed")
    workers = tuple(_worker(where, row, f"worker-{n}") for n, (where, row) in enumerate(rows, 1))
    try:
        return FleetLinks(workers)
    except UsageError as exc:
        raise UsageError(f"{source}: {exc}") from exc


def _csv_rows(text: str, source: str) -> list[tuple[str, Mapping[str, Any]]]:
    reader = csv.reader(io.StringIO(text))
    try:
        lines = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as exc:  # a field past the csv module's limit (128 KiB), a stray NUL
        raise UsageError(f"{source} line {reader.line_num}: not CSV ({exc})") from exc
    if not lines:
        raise UsageError(f"{source}: empty; expected a header line: {','.join(REQUIRED)}")
    _, header = lines[0]
    columns = [c.strip() for c in header]
    _check_fields(f"{source} header", columns)
    out: list[tuple[str, Mapping[str, Any]]] = []
    for line, row in lines[1:]:
        where = f"{source} line {line}"
        if len(row) != len(columns):
            raise UsageError(f"{where}: {len(row)} fields, the header names {len(columns)}")
        cells = {c: v.strip() for c, v in zip(columns, row, strict=True)}
        out.append((where, {k: v for k, v in cells.items() if v != ""}))
    return out


def _json_rows(text: str, source: str) -> list[tuple[str, Mapping[str, Any]]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError:
        raise UsageError(f"{source}: not a fleet file (JSON nested too deep)") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        limit = sys.get_int_max_str_digits()
        raise UsageError(f"{source}: not a fleet file (a number of over {limit} digits)") from exc
    if not isinstance(doc, dict) or set(doc) != {"workers"} or not isinstance(doc["workers"], list):
        got = f"keys {sorted(doc)}" if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(f'{source}: expected {{"workers": [ ... ]}}, got {got}')
    out: list[tuple[str, Mapping[str, Any]]] = []
    for n, row in enumerate(doc["workers"]):
        where = f"{source} workers[{n}]"
        if not isinstance(row, dict):
            raise UsageError(f"{where}: expected an object, got {type(row).__name__}")
        _check_fields(where, list(row))
        out.append((where, row))
    return out


def _check_fields(where: str, names: list[str]) -> None:
    unknown = [n for n in names if n not in REQUIRED + OPTIONAL]
    if unknown:
        raise UsageError(
            f"{where}: unknown field {unknown[0]!r}; known: {', '.join(REQUIRED + OPTIONAL)}"
        )
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:
        raise UsageError(f"{where}: field {repeated!r} given twice")
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise UsageError(f"{where}: missing field {missing[0]!r}")


def _number(where: str, field: str, value: Any) -> float:
    if isinstance(value, bool):
        value = repr(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    least = ">= 0" if field == "rtt_ms" else "> 0"
    if not math.isfinite(number) or number < 0 or (number == 0 and field != "rtt_ms"):
        raise UsageError(f"{where}: {field} must be a number {least}, got {value!r}")
    return number


def _worker(where: str, row: Mapping[str, Any], default_name: str) -> WorkerLink:
    missing = next((f for f in REQUIRED if f not in row), None)
    if missing is not None:
        raise UsageError(f"{where}: missing field {missing!r}")
    numbers = {f: _number(where, f, row[f]) for f in NUMBERS if f in row}
    for text_field in ("name", "region"):
        if text_field in row and not isinstance(row[text_field], str):
            raise UsageError(f"{where}: {text_field} must be a string, got {row[text_field]!r}")
    name = str(row.get("name") or default_name)
    return WorkerLink(name=name, region=str(row.get("region", "")), **numbers)


def fleet_to_csv(fleet: FleetLinks) -> str:
    """The fleet as a CSV fleet file (what the benchmark writes and the planner reads back)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("name", *REQUIRED, "region"))
    for w in fleet.workers:
        writer.writerow((w.name, w.downlink_mbps, w.uplink_mbps, w.rtt_ms, w.region))
    return out.getvalue()
