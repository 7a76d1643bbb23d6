"""The fenced code blocks of the docs, and how the docs test treats each one.

The rules (CONTRIBUTING.md, "Code blocks in the docs"):

- Every fenced block names its language. ```bash (or sh, shell) and ```python blocks
  are code: each runs, as written, in a fresh shell or interpreter of its own. Any
  other tag (```text, console, toml, json, hcl ...) is output or a file's contents,
  and is not run.
- An HTML comment on the line before the fence changes how a code block is run:
  ``<!-- doc-test: syntax-only: REASON -->`` checks it for syntax only (``bash -n``,
  ``compile()``), for what needs a cloud account, a GPU or verl, or a run of
  minutes that another test makes; ``<!-- doc-test: sequence NAME -->`` runs it with
  the other blocks of that sequence on the page, in order, in one shell or interpreter,
  as a reader pastes them one after another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"bash", "sh", "shell"})
PYTHON = frozenset({"python", "py"})
MARKER = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
FIX = (
    "tag it ```bash or ```python (code: it runs) or ```text (output: it does not); "
    "CONTRIBUTING.md, 'Code blocks in the docs'"
)


def pages(root: Path = ROOT) -> list[Path]:
    """The pages whose blocks are checked: the README and everything under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, what it is, and how the test treats it."""

    page: str  # the page's path from the repository root
    line: int  # the line of its opening fence (1-based)
    lang: str  # the first word of the fence's info string, "" if none
    code: str
    heading: str = ""  # the nearest heading above it, without its #s
    syntax_only: str = ""  # the reason, for a block marked syntax-only
    sequence: str = ""  # the name of the sequence it belongs to, if any

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """ "shell", "python", or "" for a block that is not code."""
        return "shell" if self.lang in SHELL else "python" if self.lang in PYTHON else ""

    @property
    def runs(self) -> bool:
        return bool(self.kind) and not self.syntax_only


@dataclass(frozen=True)
class Unit:
    """Blocks run in one shell or interpreter: one block, or a whole sequence."""

    blocks: tuple[Block, ...]

    @property
    def kind(self) -> str:
        return self.blocks[0].kind

    @property
    def where(self) -> str:
        first = self.blocks[0]
        if first.sequence:
            return f"{first.page}:{first.line} (sequence {first.sequence!r})"
        return first.where


def parse(page: str, text: str) -> tuple[list[Block], list[str]]:
    """The blocks of one page, and a line per problem (each naming where, and the fix)."""
    blocks: list[Block] = []
    problems: list[str] = []
    lines = text.splitlines()
    heading, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        opened = FENCE.match(line)
        if not opened:
            i += 1
            continue
        indent, fence = len(opened["indent"]), opened["fence"]
        end = next((j for j in range(i + 1, len(lines)) if _closes(lines[j], fence)), len(lines))
        where = f"{page}:{i + 1}"
        if end == len(lines):
            problems.append(f"{where}: a block that never closes; close it with {fence}")
        code = "".join(f"{raw[indent:]}\n" for raw in lines[i + 1 : end])
        lang = opened["info"].strip().split(" ", 1)[0].strip("{}.").lower()
        syntax_only, sequence, trouble = _marker(_line_before(lines, i))
        block = Block(page, i + 1, lang, code, heading, syntax_only, sequence)
        problems += [f"{where}: {t}" for t in trouble]
        if not lang:
            problems.append(f"{where}: a block without a language: {FIX}")
        elif (syntax_only or sequence) and not block.kind:
            problems.append(
                f"{where}: a doc-test marker on a ```{lang} block, which is not run; only "
                "```bash and ```python blocks take one"
            )
        blocks.append(block)
        i = end + 1
    return blocks, problems


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


def _line_before(lines: list[str], i: int) -> str:
    return next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")


def _marker(line: str) -> tuple[str, str, list[str]]:
    """(syntax-only reason, sequence name, problems) of the comment on the line before."""
    found = MARKER.fullmatch(line)
    if not found:
        return "", "", []
    body = found[1]
    if body.startswith("syntax-only"):
        reason = body.removeprefix("syntax-only").lstrip(":").strip()
        if not reason:
            return "", "", ["a syntax-only marker says why: <!-- doc-test: syntax-only: REASON -->"]
        return reason, "", []
    named = re.fullmatch(r"sequence\s+([\w.-]+)", body)
    if named:
        return "", named[1], []
    return (
        "",
        "",
        [
            f"unknown marker {line!r}; the markers are <!-- doc-test: syntax-only: REASON --> "
            "and <!-- doc-test: sequence NAME -->"
        ],
    )


def collect(paths: Iterable[Path], root: Path = ROOT) -> tuple[list[Block], list[str]]:
    """Every block of ``paths``, and every problem found in them."""
    blocks: list[Block] = []
    problems: list[str] = []
    for path in paths:
        found, trouble = parse(str(path.relative_to(root)), path.read_text(encoding="utf-8"))
        blocks += found
        problems += trouble
    return blocks, problems + _mixed_sequences(blocks)


def _mixed_sequences(blocks: list[Block]) -> list[str]:
    kinds: dict[tuple[str, str], set[str]] = {}
    for b in blocks:
        if b.sequence:
            kinds.setdefault((b.page, b.sequence), set()).add(b.kind)
    return [
        f"{page}: sequence {name!r} mixes shell and python blocks; name them apart"
        for (page, name), found in kinds.items()
        if len(found) > 1
    ]


def units(blocks: Iterable[Block]) -> Iterator[Unit]:
    """The runs to make: each runnable block alone, each sequence whole, in page order."""
    sequences: dict[tuple[str, str], list[Block]] = {}
    for b in blocks:
        if not b.runs:
            continue
        if not b.sequence:
            yield Unit((b,))
        elif (b.page, b.sequence) not in sequences:
            sequences[b.page, b.sequence] = [b]
        else:
            sequences[b.page, b.sequence].append(b)
    for members in sequences.values():
        yield Unit(tuple(members))
