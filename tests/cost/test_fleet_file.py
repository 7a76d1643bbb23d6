"""The fleet file (cost/fleet_file.py): CSV and JSON, strict, one-line errors naming the row."""

from __future__ import annotations

import json

import pytest

from wanrl_s3.cost import FleetLinks, WorkerLink, fleet_to_csv, parse_fleet
from wanrl_s3.errors import UsageError

CSV = """name,downlink_mbps,uplink_mbps,rtt_ms,region
home-1,80,20,45,eu-west-1
dc-2, 1000 ,1000,8,us-east-1
"""


def test_csv_and_json_give_the_same_fleet_and_the_csv_round_trips() -> None:
    from_csv = parse_fleet(CSV, "fleet.csv")
    rows = [
        {"name": "home-1", "downlink_mbps": 80, "uplink_mbps": 20, "rtt_ms": 45,
         "region": "eu-west-1"},
        {"name": "dc-2", "downlink_mbps": 1000, "uplink_mbps": 1000, "rtt_ms": 8,
         "region": "us-east-1"},
    ]  # fmt: skip
    assert parse_fleet(json.dumps({"workers": rows}), "fleet.json") == from_csv
    assert from_csv.workers[1] == WorkerLink("dc-2", 1000.0, 1000.0, 8.0, "us-east-1")
    assert parse_fleet(fleet_to_csv(from_csv), "again.csv") == from_csv


def test_optional_fields_default_and_columns_may_come_in_any_order() -> None:
    fleet = parse_fleet("rtt_ms,uplink_mbps,downlink_mbps\n0,5,10\n\n12,5,10\n", "f.csv")
    assert fleet == FleetLinks(
        (WorkerLink("worker-1", 10.0, 5.0, 0.0), WorkerLink("worker-2", 10.0, 5.0, 12.0))
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "f.csv: empty; expected a header line"),
        ("name,downlink_mbps,uplink_mbps\nw,1,1\n", "f.csv header: missing field 'rtt_ms'"),
        ("downlink_mbps,uplink_mbps,rtt_ms,rtt\n1,1,1,1\n", "f.csv header: unknown field 'rtt'"),
        ("downlink_mbps,uplink_mbps,rtt_ms\n1,1\n", "f.csv line 2: 2 fields, the header names 3"),
        (
            "downlink_mbps,uplink_mbps,rtt_ms\n1,1,1\n0,1,1\n",
            "f.csv line 3: downlink_mbps must be a number > 0, got '0'",
        ),
        (
            "downlink_mbps,uplink_mbps,rtt_ms\n1,fast,1\n",
            "f.csv line 2: uplink_mbps must be a number > 0, got 'fast'",
        ),
        (
            "downlink_mbps,uplink_mbps,rtt_ms\n1,1,-3\n",
            "f.csv line 2: rtt_ms must be a number >= 0",
        ),
        ("downlink_mbps,uplink_mbps,rtt_ms\n1,1,\n", "f.csv line 2: missing field 'rtt_ms'"),
        (
            "name,downlink_mbps,uplink_mbps,rtt_ms\na,1,1,1\na,2,2,2\n",
            "f.csv: worker name 'a' appears twice",
        ),
        ("downlink_mbps,uplink_mbps,rtt_ms\n", "f.csv: no workers"),
        (
            '{"workers": [{"downlink_mbps": 1, "uplink_mbps": 1}]}',
            "f.csv workers[0]: missing field 'rtt_ms'",
        ),
        (
            '{"workers": [{"downlink_mbps": true, "uplink_mbps": 1, "rtt_ms": 1}]}',
            "f.csv workers[0]: downlink_mbps must be a number > 0, got 'True'",
        ),
        (
            '{"workers": [{"downlink_mbps": 1, "uplink_mbps": 1, "rtt_ms": 1, "name": 7}]}',
            "f.csv workers[0]: name must be a string, got 7",
        ),
        ('{"workers": [1]}', "f.csv workers[0]: expected an object, got int"),
        ('{"hosts": []}', "f.csv: expected {\"workers\": [ ... ]}, got keys ['hosts']"),
        ("{not json", "f.csv: not JSON"),
        # what Python's own parsers refuse: each a usage error, never an internal one
        (
            f"name,downlink_mbps,uplink_mbps,rtt_ms\n{'a' * 140_000},1,1,1\n",
            "f.csv line 2: not CSV",
        ),
        ('{"workers": [{"downlink_mbps": ' + "9" * 5000 + "}]}", "f.csv: not a fleet file"),
        ('{"workers": ' + "[" * 100_000 + "]" * 100_000 + "}", "f.csv: not a fleet file"),
    ],
)
def test_bad_rows_name_the_row_and_the_field(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_fleet(text, "f.csv")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
