"""``wanrl-s3 prices``: the price table the planner uses, with each entry's source and read date.

The text form is for reading: per entry, the figures in the provider's own
billed unit, where they came from, the day they were read, and ``STALE`` when
that was more than six months ago. ``--json`` prints the table document itself,
which is also a valid ``--prices FILE``: copy it, put your negotiated rates in,
and pass it to ``wanrl-s3 estimate --prices``. ``--prices FILE`` here shows (and
strictly validates) such a file.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Mapping
from datetime import date
from typing import Any

from ..cost.freshness import STALE_AFTER_MONTHS, is_stale
from ..cost.price_file import parse_document
from ..cost.prices import PriceBook, read_price_document

_WIDTH = 100


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "prices",
        help="the price table estimate uses, with sources and the dates they were read",
        description="Print the price table with each entry's source and read date.",
    )
    parser.add_argument("--prices", metavar="FILE", help="show this price file instead")
    parser.add_argument("--json", action="store_true", help="print the table as a price file")
    parser.set_defaults(func=run)
    return parser


def _unit(entry: Mapping[str, Any]) -> str:
    return "GiB" if entry["billed_gb_bytes"] == 2**30 else "GB"


def _usd(value: float) -> str:
    return f"${value:g}"


def _size(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"


def _ladder(entry: Mapping[str, Any]) -> str:
    """'first 100 GiB free; to 10,240 GiB $0.09; ...; above $0.05', in the billed unit."""
    unit, steps = _unit(entry), []
    free = entry.get("free_egress_gb_per_month", 0)
    if free:
        steps.append(f"first {_size(free)} {unit} a month free")
    if entry.get("free_egress_storage_multiple", 0):
        steps.append(f"free up to {entry['free_egress_storage_multiple']:g}x the data stored")
    for tier in entry["egress_tiers"]:
        bound = tier["up_to_gb"]
        where = f"to {_size(bound)} {unit}" if bound is not None else "above" if steps else "flat"
        steps.append(f"{where} {_usd(tier['usd_per_gb'])}")
    return "; ".join(steps)


def _storage_lines(entry: Mapping[str, Any]) -> list[str]:
    unit, hop = _unit(entry), entry["inter_region"]
    pairs = ", ".join(f"{k} {_usd(v)}" for k, v in hop.get("to", {}).items())
    return [
        f"storage {_usd(entry['storage_usd_per_gb_month'])}/{unit}-month; PUT "
        f"{_usd(entry['put_usd_per_1000'])}, GET {_usd(entry['get_usd_per_1000'])} per 1,000",
        f"internet egress per {unit}: {_ladder(entry)}",
        f"inter-region from {hop['from']}: {_usd(hop['default_usd_per_gb'])}/{unit}"
        + (f" ({pairs})" if pairs else ""),
    ]


def _limit_lines(entry: Mapping[str, Any]) -> list[str]:
    one = entry.get("object_read_per_s")
    return [
        f"{entry['read_per_s']:,} read and {entry['write_per_s']:,} write requests a second "
        f"per {entry['scope']} before 503s" + (f"; one object: {one:,} a second" if one else "")
    ]


def _cdn_lines(entry: Mapping[str, Any]) -> list[str]:
    unit = _unit(entry)
    origins = ", ".join(f"{k} {_usd(v)}/{unit}" for k, v in entry["origins"].items())
    return [
        f"edge egress per {unit}: {_ladder(entry)}",
        f"requests {_usd(entry['request_usd_per_10000'])} per 10,000; cache fill from {origins}",
    ]


def _block(key: str, entry: Mapping[str, Any], body: list[str], stale: bool) -> list[str]:
    mark = "  STALE" if stale else ""
    head = f"{key}  {entry.get('display', '')}".rstrip()
    lines = [f"{head}{mark}", f"  read {entry['read_on']} from {entry['source']}"]
    lines += [f"  {line}" for line in body]
    lines += textwrap.wrap(
        f"source note: {entry['source_note']}",
        width=_WIDTH,
        initial_indent="  ",
        subsequent_indent="    ",
    )
    return lines


def render_table(doc: Mapping[str, Any], book: PriceBook, today: date) -> str:
    """Every entry of a validated price document, in the billed units it was written in."""
    entries = book.entries()
    out = [
        f"price table recorded {doc['recorded']}; today {today.isoformat()}; "
        f"STALE = read more than {STALE_AFTER_MONTHS} months ago",
    ]
    sections = (
        ("storage", doc["storage"], _storage_lines),
        ("cdns", doc.get("cdns", {}), _cdn_lines),
    )
    for section, table, lines in sections:
        for name, entry in table.items():
            key = f"{section}.{name}"
            out += ["", *_block(key, entry, lines(entry), is_stale(entries[key], today))]
            limits = entry.get("request_limits") if section == "storage" else None
            if limits is not None:
                key += ".request_limits"
                stale = is_stale(entries[key], today)
                out += ["", *_block(key, limits, _limit_lines(limits), stale)]
    gpus = doc["gpus"]
    rates = ", ".join(f"{k} {_usd(v)}" for k, v in gpus["usd_per_hour"].items())
    out += ["", *_block("gpus", gpus, [f"per hour: {rates}"], is_stale(entries["gpus"], today))]
    return "\n".join(out)


def run(args: argparse.Namespace, today: date | None = None) -> int:
    """Validate the table (shipped or ``--prices``) and print it; ``today`` dates STALE."""
    doc = read_price_document(args.prices)
    book = parse_document(doc)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render_table(doc, book, today or date.today()))
    return 0
