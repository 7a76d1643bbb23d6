"""Every code block of the README and docs/ runs as written, or is marked and checked.

The rules are in :mod:`tests.docs.blocks` and CONTRIBUTING.md ("Code blocks in the
docs"); how a block is run and what it must not leave behind, in :mod:`tests.docs.run`.
A failure names the page, the block's line, and the fix.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .blocks import Block, Unit, collect, pages, units
from .run import run_unit

BLOCKS, PROBLEMS = collect(pages())
CODE = [b for b in BLOCKS if b.kind]
UNITS = list(units(BLOCKS))
# What a recipe's output must say, by (page, the heading above its first block): the
# claims its comments make ("a 1% delta") checked against what it printed.
EXPECTED: dict[tuple[str, str], tuple[str, ...]] = {
    ("docs/quickstart.md", "0. Try it on this machine"): (
        r"published v1 \(full\)",
        r"published v2 \(delta against v1\)",
        r"(?m)^\s+1\s+2/2\s",  # both workers installed v1 ...
        r"(?m)^\s+2\s+2/2\s",  # ... and v2
        r"(?m)^\s+w1\s+-\s+v2\s",
        r"(?m)^\s+w2\s+-\s+v2\s",
        r"(?m)^\s+2\* delta\s+1\s",
    ),
    ("docs/quickstart.md", "Through a CDN edge"): (
        r"(?s)every tensor verified.*every tensor verified",  # both pulls
        r"X-Cache-Status: HIT",  # the second pull was served from the edge's cache
        r"the worker installed v1 through the edge",
    ),
    ("docs/multi-region.md", "0. Try it on this machine"): (
        r"relayed v1 to euw1",
        r"relayed v1 to apne1",
        r"region apne1 lags the primary use1 by 2 versions \(limit 1\): reading from region use1",
        r"(?m)^\s+w-apne1\s+use1\s+v3\s.*fallback: region apne1 lags",
        r"relayed v3 to euw1",
        r"(?m)^\s+3\* delta\s+2\s",
    ),
    ("docs/stores.md", "What the doctor measured here"): (  # the table's SeaweedFS and moto rows
        r"(?s)doctor: s3://probe/run at .*wrong checksum refused\s+held: .*"
        r"doctor: s3://wanrl-\w+/run at .*wrong checksum refused\s+NOT HELD",
    ),
    ("docs/security.md", "Threat model"): (
        r"pulled v1 to pulled.safetensors",
        r"LATEST \(v1\) is signed by unknown key",
        r"LATEST \(v2\) is not signed, and signatures are required",
        r"(?s)refused: exit status 3.*refused: exit status 3",
    ),
}


def test_every_block_is_tagged_and_every_marker_is_known() -> None:
    assert len(CODE) >= 20 and UNITS  # the pages were found and read
    assert PROBLEMS == [], "\n".join(PROBLEMS)


def test_every_expected_output_belongs_to_a_block_that_runs() -> None:
    """A heading renamed or a block marked syntax-only must not silently drop a check."""
    running = {(u.blocks[0].page, u.blocks[0].heading) for u in UNITS}
    assert set(EXPECTED) <= running, f"no block runs under {sorted(set(EXPECTED) - running)}"


@pytest.mark.parametrize("block", CODE, ids=lambda b: b.where)
def test_code_blocks_parse(block: Block) -> None:
    if block.kind == "python":
        try:
            compile(block.code, block.where, "exec")
        except SyntaxError as exc:
            pytest.fail(f"{block.where}: the ```python block does not parse: {exc}")
        return
    done = subprocess.run(
        ["bash", "-n"], input=block.code, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{block.where}: the ```{block.lang} block does not parse:\n" + (
        done.stderr.replace("bash: line ", f"{block.page} block line ")
    )


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.where)
def test_code_blocks_run_as_written(unit: Unit, tmp_path: Path) -> None:
    outcome = run_unit(unit, tmp_path)
    first = unit.blocks[0]
    expected = EXPECTED.get((first.page, first.heading), ())
    missing = [p for p in expected if not re.search(p, outcome.output)]
    if missing:
        outcome.problems.append(f"its output does not say {', '.join(missing)}")
    if outcome.returncode != 0 and not outcome.problems:
        outcome.problems.append(f"exited with status {outcome.returncode}")
    assert not outcome.problems, (
        f"{unit.where} (```{first.lang}, under {first.heading!r}):\n  - "
        + "\n  - ".join(outcome.problems)
        + "\nfix: make it run as written on this machine, or, if it needs a cloud account, a GPU "
        "or verl, mark it <!-- doc-test: syntax-only: REASON --> on the line before the fence "
        "(CONTRIBUTING.md)\noutput (the end):\n" + outcome.output[-4000:]
    )
