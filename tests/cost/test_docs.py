"""docs/sizing-and-cost.md pastes real output: keep it equal to what the command prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from wanrl_s3.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "sizing-and-cost.md"
BLOCK = re.compile(r"```console\n\$ wanrl-s3 (.*?)\n(?!      )(.*?)```", re.DOTALL)


def _examples() -> list[tuple[list[str], str, int]]:
    """(argv, printed text, exit status) for each console block running `wanrl-s3`.

    A block ending in ``$ echo $?`` shows a failure: its text is stderr and the
    line after the echo is the status.
    """
    found = []
    for command, printed in BLOCK.findall(DOC.read_text(encoding="utf-8")):
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


def test_the_doc_has_its_examples_and_plot() -> None:
    assert [status for *_, status in _examples()] == [0, 0, 0, 5]
    assert (DOC.parent / "img" / "sizing-8b.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("argv", "printed", "status"), _examples())
def test_pasted_output_is_what_the_command_prints(
    argv: list[str], printed: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert (err if status else out).rstrip("\n") == printed
