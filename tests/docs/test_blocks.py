"""The docs test's own parts: the block rules, and the runner that finds what a block left.

Each rule is shown failing on a made-up page, so that the docs test can be trusted when
it passes: an untagged block, an unknown marker, a recipe that leaves a server, a key,
a trap or a directory behind in the reader's shell.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import run
from .blocks import ROOT, Block, Unit, parse, units
from .run import run_unit


@pytest.fixture(autouse=True)
def _short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "GRACE_S", 0.5)  # the blocks here leave what they leave at once


PAGE = """# Title

```bash
echo one
```

## Second

<!-- doc-test: syntax-only: needs an AWS account -->
```python
import boto3
```

1. In a list:

   <!-- doc-test: sequence demo -->
   ```sh
   x=1
   ```

<!-- doc-test: sequence demo -->
```bash
echo "$x"
```

```text
output, not run
```
"""


def test_blocks_are_found_with_their_line_heading_and_marker() -> None:
    blocks, problems = parse("page.md", PAGE)
    assert problems == []
    assert [(b.line, b.lang, b.kind, b.heading) for b in blocks] == [
        (3, "bash", "shell", "Title"),
        (10, "python", "python", "Second"),
        (17, "sh", "shell", "Second"),
        (22, "bash", "shell", "Second"),
        (26, "text", "", "Second"),
    ]
    assert blocks[1].syntax_only == "needs an AWS account" and not blocks[1].runs
    assert blocks[2].code == "x=1\n"  # the list's indentation is not part of the code
    assert not blocks[4].runs
    found = list(units(blocks))
    assert [u.where for u in found] == ["page.md:3", "page.md:17 (sequence 'demo')"]
    assert [b.line for b in found[1].blocks] == [17, 22]


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("```\nls\n```\n", "page.md:1: a block without a language: tag it"),
        ("<!-- doc-test: skip -->\n```bash\nls\n```\n", "page.md:2: unknown marker"),
        ("<!-- doc-test: syntax-only -->\n```bash\nls\n```\n", "a syntax-only marker says why"),
        ("<!-- doc-test: sequence a -->\n```text\nx\n```\n", "a doc-test marker on a ```text"),
        ("```bash\nls\n", "page.md:1: a block that never closes"),
    ],
)
def test_a_page_that_breaks_a_rule_is_named_with_its_line(page: str, problem: str) -> None:
    _, problems = parse("page.md", page)
    assert len(problems) == 1 and problem in problems[0], problems


def _unit(*codes: str, lang: str = "bash") -> Unit:
    return Unit(tuple(Block("page.md", 10 * (i + 1), lang, c, "H") for i, c in enumerate(codes)))


def test_a_recipe_in_a_subshell_that_cleans_up_passes(tmp_path: Path) -> None:
    recipe = """(
  set -euo pipefail
  scratch=$(mktemp -d) && cd "$scratch"
  trap 'trap "" INT; set +e; kill $(jobs -p) 2>/dev/null; wait; rm -rf "$scratch"' EXIT
  export AWS_ACCESS_KEY_ID=testing
  sleep 60 &
  echo "started $!"
)
"""
    outcome = run_unit(_unit(recipe), tmp_path)
    assert (outcome.returncode, outcome.problems) == (0, []), outcome
    assert "started" in outcome.output


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        (
            "export AWS_PROFILE=x\n",
            "left exported variables set in the reader's shell: AWS_PROFILE",
        ),
        ("STORE=s3://b/p\n", "left shell variables set in the reader's shell: STORE"),
        ('cd "$(mktemp -d)"\n', "left the reader's shell in "),
        ("trap 'echo bye' EXIT\n", "left traps set in the reader's shell: trap -- 'echo bye' EXIT"),
        ("set -e\n", "left shell options set in the reader's shell: set -o errexit"),
        ("f() { :; }\n", "left functions set in the reader's shell: f"),
        ("sleep 60 &\n", "left running after it ended: sleep 60"),
        ("true\nfalse\ntrue\n", "a command exited with status 1 at page.md:12"),
        ("(\n  set -e\n  true\n  false\n)\n", "a command exited with status 1 at page.md:14"),
        ("exit 0\n", "exited with status 0 before its end"),
    ],
)
def test_what_a_block_leaves_in_the_readers_shell_is_named(
    code: str, problem: str, tmp_path: Path
) -> None:
    outcome = run_unit(_unit(code), tmp_path)
    assert any(p.startswith(problem) for p in outcome.problems), outcome.problems


def test_a_sequence_shares_one_shell_and_is_judged_at_its_end(tmp_path: Path) -> None:
    kept = run_unit(_unit("x=41\n", "echo $((x + 1))\n"), tmp_path / "kept")
    assert "42" in kept.output
    assert kept.problems[0].startswith("left shell variables set in the reader's shell: x")
    cleaned = run_unit(_unit("x=41\n", "echo $((x + 1)); unset x\n"), tmp_path / "cleaned")
    assert cleaned.problems == [] and "42" in cleaned.output


def test_blocks_run_without_the_callers_cloud_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-the-test-machine")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "from-the-test-machine")
    outcome = run_unit(_unit('test -z "${AWS_ACCESS_KEY_ID:-}${AZURE_STORAGE_KEY:-}"\n'), tmp_path)
    assert outcome.problems == [], outcome.output


def test_python_blocks_share_a_namespace_and_a_failure_names_the_page_line(
    tmp_path: Path,
) -> None:
    ok = run_unit(_unit("x = 41\n", "print(x + 1)\n", lang="python"), tmp_path / "ok")
    assert ok.problems == [] and "42" in ok.output
    bad = run_unit(_unit("x = 1\n", "y = 2\nraise SystemExit(x / 0)\n", lang="python"), tmp_path)
    assert bad.problems and 'File "page.md", line 22' in bad.output  # the block's 2nd line


def test_a_file_left_in_the_checkout_is_named(tmp_path: Path) -> None:
    probe = ROOT / "doc-test-probe.tmp"
    try:
        outcome = run_unit(_unit(f"open({str(probe)!r}, 'w').close()\n", lang="python"), tmp_path)
    finally:
        probe.unlink(missing_ok=True)
    assert outcome.problems == [
        "added to or changed in the checkout: doc-test-probe.tmp (work in a temporary folder)"
    ]


def test_a_tracked_file_changed_in_the_checkout_is_named(tmp_path: Path) -> None:
    tracked = Path(__file__).with_name("__init__.py")
    text = tracked.read_bytes()
    try:
        outcome = run_unit(
            _unit(f"open({str(tracked)!r}, 'a').write('#')\n", lang="python"), tmp_path
        )
    finally:
        tracked.write_bytes(text)
    assert outcome.problems == [
        "added to or changed in the checkout: changed: tests/docs/__init__.py (work in a "
        "temporary folder)"
    ]


def test_what_a_block_leaves_in_the_temporary_folder_is_named(tmp_path: Path) -> None:
    outcome = run_unit(_unit("mktemp -d >/dev/null\n"), tmp_path)
    assert len(outcome.problems) == 1, outcome.problems
    assert outcome.problems[0].startswith("left in the temporary folder: tmp.")


def test_a_blocks_temporary_folder_is_short_however_deep_the_scratch(tmp_path: Path) -> None:
    """A socket path has at most 107 bytes: SeaweedFS in ``mktemp -d`` needs a short TMPDIR."""
    outcome = run_unit(_unit('[ "${#TMPDIR}" -le 40 ]\n[ -d "$TMPDIR" ]\n'), tmp_path / ("x" * 80))
    assert outcome.problems == []


def test_a_process_in_a_session_of_its_own_is_found_by_its_environment(tmp_path: Path) -> None:
    """nginx, as local_cdn_edge starts it, leaves the block's session: its TMPDIR finds it."""
    pid_file = tmp_path / "pid"
    outcome = run_unit(_unit(f"setsid sleep 62 & echo $! > {pid_file}\n"), tmp_path / "run")
    assert any("sleep 62" in p for p in outcome.problems), outcome.problems
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def test_what_a_block_leaves_running_is_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    outcome = run_unit(_unit(f"sleep 61 & echo $! > {pid_file}\n"), tmp_path / "run")
    assert any("sleep 61" in p for p in outcome.problems)
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
