"""Run the docs' code blocks as a reader pastes them, and find what they leave behind.

A reader pastes a block into the shell they keep working in, at the checkout's root.
So a block passes only if it succeeds and leaves that shell as it found it: no
process still running, no variable, function, option or trap set (an exported key
overrides the profile a later command means to use; an EXIT trap at the top level
fires only when the reader closes the shell), the same working directory, no file
added to or changed in the checkout, and nothing left in the temporary folder. A
recipe that needs all that runs in a subshell, ``( ... )``, that cleans up after
itself (CONTRIBUTING.md).

Blocks run in a new session, with a temporary folder (``TMPDIR``) of their own, so
that whatever they start is found once the shell has gone, by its session id or, for
what starts a session of its own (nginx), by that ``TMPDIR`` in its environment, and
is then stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .blocks import ROOT, Block, Unit

TIMEOUT_S = 600.0
GRACE_S = 5.0  # for what a block stopped as it ended to finish exiting
CLOUD_ENV = re.compile(
    r"^(AWS_|AZURE_|GOOGLE_APPLICATION_CREDENTIALS$|STORAGE_EMULATOR_HOST$|CLOUDSDK_|VIRTUAL_ENV$)"
)
# Variables bash itself changes as it runs (PWD: the directory is checked on its own).
DYNAMIC = frozenset(
    {
        "_", "BASH_ARGC", "BASH_ARGV", "BASH_COMMAND", "BASH_LINENO", "BASH_REMATCH",
        "BASH_SOURCE", "BASHPID", "COLUMNS", "EPOCHREALTIME", "EPOCHSECONDS", "FUNCNAME",
        "HISTCMD", "LINENO", "LINES", "OLDPWD", "PIPESTATUS", "PWD", "RANDOM", "SECONDS",
        "SRANDOM",
    }
)  # fmt: skip
SNAPSHOT = "; ".join(
    f"{command} >{{d}}/{name}.{{n}} || :"  # compgen fails when it finds nothing
    for command, name in (
        ("compgen -v", "vars"),
        ("compgen -A function", "functions"),
        ("export -p", "env"),
        ("set +o", "options"),
        ("shopt -p", "shopt"),
        ("trap -p", "traps"),
        ("pwd", "pwd"),
    )
)
FAILED = "doc-test: failed at script line"


@dataclass
class Outcome:
    """What a run gave: its exit status, its output, and what it did wrong."""

    returncode: int
    output: str
    problems: list[str] = field(default_factory=list)


def environment(scratch: Path) -> dict[str, str]:
    """A new user's environment: this interpreter's tools on PATH, no cloud keys, no venv,
    an empty HOME in ``scratch`` and an empty temporary folder of the run's own.

    The temporary folder is a new one in the system's, not in ``scratch``: its path stays
    short, as a reader's ``/tmp`` is, since a server's Unix socket in it (SeaweedFS's, in
    a folder of ``mktemp -d``) cannot have a path longer than 107 bytes. The caller
    removes it.
    """
    env = {k: v for k, v in os.environ.items() if not CLOUD_ENV.match(k)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(scratch / "home")
    (scratch / "home").mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = tempfile.mkdtemp(prefix="doc-test-")
    return env


def run_unit(unit: Unit, scratch: Path) -> Outcome:
    """Run ``unit`` at the checkout's root, as written; what it left is in ``problems``."""
    scratch.mkdir(parents=True, exist_ok=True)
    before = checkout_state()
    if unit.kind == "shell":
        script, starts = shell_script(unit.blocks, scratch)
        argv = ["bash", "--norc", "--noprofile", str(script)]
    else:
        script = scratch / "blocks.json"
        script.write_text(json.dumps([dataclasses.asdict(b) for b in unit.blocks]))
        argv = [sys.executable, str(Path(__file__).with_name("python_session.py")), str(script)]
        starts = []
    env = environment(scratch)
    try:
        outcome = _run(argv, env, scratch / "output.log")
        kept = sorted(p.name for p in Path(env["TMPDIR"]).iterdir())
    finally:
        shutil.rmtree(env["TMPDIR"], ignore_errors=True)
    if unit.kind == "shell":
        outcome.problems += shell_problems(scratch, starts, outcome)
    elif outcome.returncode != 0:
        outcome.problems.append(f"exited with status {outcome.returncode} (traceback below)")
    added = sorted(set(checkout_state()) - set(before))
    if added:
        outcome.problems.append(
            f"added to or changed in the checkout: {', '.join(added)} (work in a temporary folder)"
        )
    if kept:
        outcome.problems.append(
            f"left in the temporary folder: {', '.join(kept)} (remove the recipe's scratch "
            "directory in its EXIT trap, and stop what it started there)"
        )
    return outcome


def shell_script(blocks: tuple[Block, ...], state: Path) -> tuple[Path, list[tuple[int, Block]]]:
    """The blocks between two snapshots of the shell; (script line, block) of each start."""
    head = [
        # set -e that the snapshots do not see; -E (errtrace) to name the line that failed
        # inside a recipe's subshell too, where the subshell's own set -e then ends it
        "set -E",
        f"trap 'echo \"{FAILED} $LINENO, status $?\" >&2; [ $BASH_SUBSHELL = 0 ] && exit 97' ERR",
        SNAPSHOT.format(d=state, n=0),
    ]
    lines, starts = list(head), []
    for b in blocks:
        starts.append((len(lines) + 1, b))
        lines += b.code.splitlines()
    lines += [SNAPSHOT.format(d=state, n=1), "trap - ERR EXIT HUP INT TERM", "exit 0"]
    script = state / "blocks.sh"
    script.write_text("\n".join(lines) + "\n")
    return script, starts


def shell_problems(state: Path, starts: list[tuple[int, Block]], outcome: Outcome) -> list[str]:
    """What the shell run did wrong, each with its fix."""
    found = re.findall(rf"{FAILED} (\d+), status (\d+)", outcome.output)
    if found and outcome.returncode == 97:  # the first is where it failed, within subshells
        line, status = int(found[0][0]), found[0][1]
        return [f"a command exited with status {status} at {_page_line(starts, line)}"]
    if not (state / "pwd.1").exists():
        return [
            f"exited with status {outcome.returncode} before its end (an `exit` at the top "
            "level closes the reader's shell: put the recipe in ( ... ))"
        ]
    problems = []

    def read(name: str, n: int) -> list[str]:
        return (state / f"{name}.{n}").read_text().splitlines()

    new_vars = sorted(set(read("vars", 1)) - set(read("vars", 0)) - DYNAMIC)
    exported = [e for e in set(read("env", 1)) - set(read("env", 0)) if _env_name(e) not in DYNAMIC]
    for what, items in (
        ("shell variables", new_vars),
        ("exported variables", sorted(_env_name(e) for e in exported)),
        ("functions", sorted(set(read("functions", 1)) - set(read("functions", 0)))),
        ("shell options", sorted(set(read("options", 1)) - set(read("options", 0)))),
        ("shell options", sorted(set(read("shopt", 1)) - set(read("shopt", 0)))),
        ("traps", sorted(set(read("traps", 1)) - set(read("traps", 0)))),
    ):
        if items:
            problems.append(f"left {what} set in the reader's shell: {', '.join(items)}")
    if read("pwd", 1) != read("pwd", 0):
        problems.append(f"left the reader's shell in {read('pwd', 1)[0]}")
    if problems:
        problems.append("run the recipe in a subshell, ( ... ), that cleans up after itself")
    return problems


def _env_name(line: str) -> str:
    return line.removeprefix("declare -x ").split("=", 1)[0]


def _page_line(starts: list[tuple[int, Block]], line: int) -> str:
    """The page and line of script line ``line``."""
    for first, block in reversed(starts):
        if line >= first:
            return f"{block.page}:{block.line + line - first + 1}"
    return f"script line {line}"


def _run(argv: list[str], env: dict[str, str], log: Path) -> Outcome:
    """Run ``argv``; its output goes to a file, which whatever it leaves running may hold."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its session id finds whatever it leaves running
        )
    problems = []
    try:
        proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        problems.append(f"still running after {TIMEOUT_S:g} s")
    left = survivors(proc.pid, f"TMPDIR={env['TMPDIR']}")
    if left:
        problems.append(
            "left running after it ended: " + "; ".join(left) + " (stop what the recipe starts: "
            "trap '...' EXIT inside its subshell)"
        )
    return Outcome(proc.returncode, log.read_text(errors="replace"), problems)


def survivors(session: int, variable: str) -> list[str]:
    """The command lines of the processes left in ``session`` or carrying ``variable``
    (``NAME=value``) in their environment, once they have had time to end; they are then
    killed."""
    deadline = time.monotonic() + GRACE_S
    while True:
        left = _left(session, variable.encode() + b"\0")
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return sorted(set(left.values()))


def _left(session: int, variable: bytes) -> dict[int, str]:
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            if int(fields[3]) == session or variable in (stat.parent / "environ").read_bytes():
                raw = (stat.parent / "cmdline").read_bytes()
                found[int(stat.parent.name)] = raw.replace(b"\0", b" ").decode().strip()[:120]
    return found


def checkout_state() -> list[str]:
    """The files of the checkout that git does not track, ignored ones included (caches
    aside), and those it tracks that differ from the index (named "changed: PATH")."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=normal"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        line[3:] if line[:2] in ("??", "!!") else f"changed: {line[3:]}"
        for line in out.splitlines()
        if line[1] != " " and not re.search(r"(__pycache__|_cache)/?$", line)
    ]
