"""Every option of every command says, in ``--help``, what it is, its default and its form.

The parsers are walked, not listed: a new option without help text, with a default
that ``--help`` hides, or required without saying so fails here. ``COLUMNS`` is set
wide so that each entry is one line and a wrapped default is still found whole.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from wanrl_s3.cli.app import build_parser
from wanrl_s3.cli.help import has_default
from wanrl_s3.testing.__main__ import build_parser as build_testing_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def _commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for name, sub in _subcommands(build_parser()).items():
        yield f"wanrl-s3 {name}", sub
    for name, sub in _subcommands(build_testing_parser()).items():
        yield f"python -m wanrl_s3.testing {name}", sub


@pytest.fixture(autouse=True)
def _wide_and_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # a default read from the env


def _entry(help_text: str, action: argparse.Action) -> str:
    """What ``--help`` prints for ``action``: its invocation, then its help, on one line.

    The help starts on the next line, further indented, after a long invocation.
    """
    names = set(action.option_strings) or {action.metavar or action.dest}
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        if re.split(r"[ ,]", line.strip(), maxsplit=1)[0] not in names:
            continue
        indent = len(line) - len(line.lstrip())
        block = [line]
        for more in lines[i + 1 :]:
            if not more.strip() or len(more) - len(more.lstrip()) <= indent:
                break
            block.append(more)
        return " ".join(" ".join(block).split())
    raise AssertionError(f"{sorted(names)} not in the help text")


def _shown(value: object) -> set[str]:
    """How a default may be written: 3600 or 3600.0 for 3600.0, A100-80GB:4 for a pair."""
    if isinstance(value, float):
        return {f"{value:g}", repr(value)} | ({str(int(value))} if value.is_integer() else set())
    if isinstance(value, tuple) and all(isinstance(v, tuple) for v in value):
        return {",".join(":".join(str(part) for part in pair) for pair in value)}
    return {str(value)}


def _problems(command: str, parser: argparse.ArgumentParser) -> list[str]:
    help_text, found = parser.format_help(), []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue  # a hidden, moved flag that only names its replacement
        name = "/".join(action.option_strings) or str(action.metavar or action.dest)
        where = f"{command} {name}"
        if not action.help:
            found.append(f"{where}: no help text")
            continue
        entry = _entry(help_text, action)
        shown = "|".join(map(re.escape, _shown(action.default)))
        if has_default(action) and not re.search(rf"default:? [^)]*\b({shown})\b", entry):
            found.append(f"{where}: default {action.default!r} not shown in {entry!r}")
        if action.option_strings and action.required and "required" not in entry:
            found.append(f"{where}: required but --help does not say so: {entry!r}")
        takes_value = bool(action.option_strings) and action.nargs != 0
        if takes_value and action.metavar is None and action.choices is None:
            found.append(f"{where}: no metavar (the form of its value): {entry!r}")
    return found


def test_every_option_has_help_its_default_and_its_form() -> None:
    problems = [p for command, parser in _commands() for p in _problems(command, parser)]
    assert problems == []


def test_the_walk_sees_every_command_and_catches_a_hidden_default() -> None:
    """The check itself: every subcommand is walked, and a bare option is caught."""
    commands = dict(_commands())
    assert {c.split()[-1] for c in commands} >= {
        "publish", "pull", "inspect", "gc", "status", "worker", "relay", "keygen",
        "estimate", "prices", "serve-s3", "wait-s3", "make-policy",
    }  # fmt: skip
    bare = argparse.ArgumentParser(prog="bare")
    bare.add_argument("--keep", type=int, default=20)
    bare.add_argument("--grace-s", type=float, default=3600.0, help="a grace period")
    bare.add_argument("--out", required=True, metavar="FILE", help="where to write")
    assert _problems("bare", bare) == [
        "bare --keep: no help text",
        "bare --grace-s: default 3600.0 not shown in '--grace-s GRACE_S a grace period'",
        "bare --grace-s: no metavar (the form of its value): '--grace-s GRACE_S a grace period'",
        "bare --out: required but --help does not say so: '--out FILE where to write'",
    ]


def test_one_option_name_means_one_thing() -> None:
    """``--regions`` is a regions FILE wherever it appears (estimate counts with another)."""
    for command, parser in _commands():
        for action in parser._actions:
            if "--regions" in action.option_strings and action.help != argparse.SUPPRESS:
                assert action.metavar == "FILE", command


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["gc", "--help"], ["--keep N", "(default: 20)", "--grace-s S", "(default: 3600)"]),
        (["estimate", "--help"], ["--batch N", "trajectories per learner step (required)"]),
        (["publish", "--help"], ["s3://", "gs://", "az://", "file://", "memory://"]),
        (["status", "--help"], ["--verify-key PUBLIC.pem", "measure only versions"]),
    ],
)
def test_help_prints_and_exits_0(
    argv: list[str], says: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser(argv).parse_args(argv)
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert [s for s in says if s not in out] == []


def test_only_commands_that_check_signatures_take_a_verify_key() -> None:
    """gc and doctor check no signature: a --verify-key there would be ignored, so it is
    refused as unknown; the readers say what they refuse, publish which delta base it
    trusts, the relay which versions it copies."""
    takes = {
        command.split()[-1]
        for command, parser in _commands()
        for action in parser._actions
        if "--verify-key" in action.option_strings
    }
    assert takes == {"pull", "inspect", "status", "worker", "publish", "relay"}


def test_only_commands_that_read_versions_take_a_run() -> None:
    """--run picks the run a reader follows; publish, gc and doctor follow none."""
    takes = {
        command.split()[-1]
        for command, parser in _commands()
        for action in parser._actions
        if "--run" in action.option_strings
    }
    assert takes == {"pull", "inspect", "status", "worker", "relay"}


@pytest.mark.parametrize(
    ("argv", "old", "dest", "value"),
    [
        (["worker", "--store", "memory://x", "--out-dir", "d"], ["--share-dir", "c"],
         "host_cache_dir", "c"),
        (["status", "--store", "memory://x"], ["--no-freeze"], "record", False),
    ],
)  # fmt: skip
def test_a_renamed_option_still_works_hidden_and_warns_once(
    argv: list[str], old: list[str], dest: str, value: object,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from wanrl_s3.cli import common

    monkeypatch.setattr(common, "_warned_options", set())
    parser = build_parser()
    assert getattr(parser.parse_args(argv), dest) != value  # the new option's default
    assert getattr(parser.parse_args([*argv, *old]), dest) == value
    assert getattr(parser.parse_args([*argv, *old]), dest) == value
    err = capsys.readouterr().err
    assert err.count(f"warning: {old[0]} is deprecated: use --") == 1, err
    assert old[0] not in _subcommands(parser)[argv[0]].format_help()
