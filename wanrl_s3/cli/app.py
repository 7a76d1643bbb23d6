"""The ``wanrl-s3`` command line.

Each subcommand lives in its own module and exposes ``add_parser(subparsers)``,
which adds its parser and sets ``func=run`` where ``run(args) -> int``. This
module only wires them together and turns every :class:`WanrlError` into one
line on stderr and the exit code the error class carries. No traceback ever
reaches the user; an unexpected exception prints one line and exits 1. A
one-shot command's warnings are held until it succeeds (:mod:`.held`), so that
a failure's stderr is its one error line.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import UsageError, WanrlError
from .held import HeldLines
from .help import HelpFormatter

# Subcommand modules, imported lazily so `wanrl-s3 estimate` never pays for boto3.
SUBCOMMANDS: dict[str, str] = {
    "publish": "wanrl_s3.cli.publish",
    "pull": "wanrl_s3.cli.pull",
    "inspect": "wanrl_s3.cli.inspect",
    "gc": "wanrl_s3.cli.gc",
    "status": "wanrl_s3.cli.status",
    "worker": "wanrl_s3.cli.worker",
    "relay": "wanrl_s3.cli.relay",
    "doctor": "wanrl_s3.cli.doctor",
    "keygen": "wanrl_s3.cli.keygen",
    "estimate": "wanrl_s3.cli.estimate",
    "prices": "wanrl_s3.cli.prices",
}


# Subcommands that run until stopped and log as they go (their own logging set-up): their
# lines go out at once. Every other command's warnings are held (see HeldLines).
LOGGING_COMMANDS = frozenset({"worker", "relay"})


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors stay one line,
    and whose ``--help`` shows every default (:class:`HelpFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("wanrl-s3").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; when ``argv`` names a subcommand, only that module is imported.

    (``wanrl-s3 estimate`` then starts without boto3, torch or the codec.)
    """
    parser = _Parser(prog="wanrl-s3", description="Policy snapshots for WAN rollout fleets.")
    parser.add_argument("--version", action="version", version=_package_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    chosen = next((a for a in argv if not a.startswith("-")), None)
    names = [chosen] if chosen in SUBCOMMANDS else list(SUBCOMMANDS)
    for name in names:
        importlib.import_module(SUBCOMMANDS[name]).add_parser(subparsers)
    return parser


def _quiet_libraries() -> None:
    """Keep boto's INFO lines ("Found credentials in environment variables.") off stderr.

    A subcommand that logs at INFO (the worker) would otherwise print them
    around its own lines, and before an error line that must stand alone.
    """
    for name in ("botocore", "boto3", "s3transfer", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"wanrl-s3 {version('wanrl-s3')}"
    except PackageNotFoundError:
        return "wanrl-s3 (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_libraries()
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = build_parser(argv).parse_args(argv)
        if args.command in LOGGING_COMMANDS:
            return int(args.func(args) or 0)
        with HeldLines() as held:
            code = int(args.func(args) or 0)
        for line in held.lines:  # reached only when the command did not raise
            print(line, file=sys.stderr)
        return code
    except WanrlError as exc:
        print(f"wanrl-s3: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("wanrl-s3: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the promise: never a traceback from the CLI
        print(
            f"wanrl-s3: internal error: {type(exc).__name__}: {exc} (please report this)",
            file=sys.stderr,
        )
        return 1
