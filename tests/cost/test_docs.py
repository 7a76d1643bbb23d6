"""docs/sizing-and-cost.md pastes real output: keep it equal to what the command prints."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from wanrl_s3.cli import main
from wanrl_s3.cost.inputs import LABELS

DOC = Path(__file__).resolve().parents[2] / "docs" / "sizing-and-cost.md"
BLOCK = re.compile(r"```console\n\$ wanrl-s3 (.*?)\n(?!      )(.*?)```", re.DOTALL)
JSON_BLOCK = re.compile(r"```json\n(.*?)```", re.DOTALL)
#: Where the page's own figures end and the coded / multi-rank examples begin.
NEW_SECTION = "## Coded full versions and the trainer's publication"
#: The publication table's shared flags (its text names them); each row adds its own.
TABLE_BASE = ["--t-train-s", "1500", "--batch", "2048", "--staleness", "3", "--steps", "100"]
TABLE_PARAMS = {"8B": "8.2e9", "70B": "70e9"}


def _examples(text: str | None = None) -> list[tuple[list[str], str, int]]:
    """(argv, printed text, exit status) for each console block running `wanrl-s3`.

    A block ending in ``$ echo $?`` shows a failure: its text is stderr and the
    line after the echo is the status.
    """
    found = []
    for command, printed in BLOCK.findall(text or DOC.read_text(encoding="utf-8")):
        argv = shlex.split(command.replace("\\\n", " "))
        lines = printed.rstrip("\n").splitlines()
        if "--plot" in argv:  # the PNG is committed; a test must not rewrite it
            cut = argv.index("--plot")
            del argv[cut : cut + 2]
            lines = [line for line in lines if not line.startswith("plot written to")]
        status = 0
        if "$ echo $?" in lines:
            status = int(lines[-1])
            lines = lines[: lines.index("$ echo $?")]
        found.append((argv, "\n".join(lines), status))
    return found


def _json_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_doc_has_its_examples_and_plot() -> None:
    assert [status for *_, status in _examples()] == [0, 0, 0, 0, 0, 0, 0, 0, 5, 0]
    assert (DOC.parent / "img" / "sizing-8b.png").read_bytes()[:4] == b"\x89PNG"


def test_the_pages_own_figures_are_for_raw_full_snapshots() -> None:
    """The reference page ships full snapshots raw: its examples say --full-ratio 1."""
    text = DOC.read_text(encoding="utf-8")
    page = text[: text.index(NEW_SECTION)] + text[text.index("## When the plan is infeasible") :]
    examples = _examples(page)
    assert len(examples) == 5
    for argv, printed, status in examples:
        assert argv[argv.index("--full-ratio") + 1] == "1", argv
        page_figure = "--density below 96.8%" if status else "downlink): 1312 s full, 66 s delta"
        assert page_figure in printed


@pytest.mark.parametrize(("argv", "printed", "status"), _examples())
def test_pasted_output_is_what_the_command_prints(
    argv: list[str], printed: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert (err if status else out).rstrip("\n") == printed


def _table_rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| point | flags |") :].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
    return rows[2:]  # past the header and the rule


def test_the_publication_table_covers_both_points() -> None:
    rows = _table_rows()
    assert len(rows) == 12 and {r[0] for r in rows} == {"8B", "70B"}
    assert {r[1] for r in rows} >= {
        "`--full-ratio 1`",
        "(none)",
        "`--trainer-ranks 8 --trainer-uplink-gbps 10`",
    }


@pytest.mark.parametrize("row", _table_rows(), ids=lambda r: f"{r[0]} {r[1]}")
def test_the_publication_table_is_what_the_planner_says(
    row: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    point, flags, *cells = row
    extra = [] if flags == "(none)" else shlex.split(flags.strip("`"))
    plan = _json_of(["estimate", "--params", TABLE_PARAMS[point], *TABLE_BASE, *extra], capsys)
    rows, best = plan["by_topology"], plan["by_topology"][plan["recommended"]]
    full, delta = rows["object_storage_full"], rows["object_storage_delta"]
    assert cells == [
        f"{plan['full_gb']:.1f}",
        f"{full['publish_s']:.1f}",
        f"{delta['publish_s']:.1f}",
        f"{full['t_bcast_s']:.0f}",
        f"{delta['t_bcast_s']:.0f}",
        LABELS[plan["recommended"]],
        f"{best['total_usd_per_step']:.2f}",
    ]


def test_the_json_excerpts_are_the_first_estimates(capsys: pytest.CaptureFixture[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    headline, chain = (json.loads(b) for b in JSON_BLOCK.findall(text)[:2])
    plan = _json_of(_examples()[0][0], capsys)
    assert headline == {key: plan[key] for key in headline}
    peer_chain = plan["by_topology"]["peer_chain"]
    assert chain == {key: peer_chain[key] for key in chain}
