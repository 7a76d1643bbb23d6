"""Lines for stderr besides a command's result, held until the command ends.

The promise of every one-shot command: when it fails, stderr is one line, the
error. A warning printed on the way (a base that did not verify, a worker left
out, the region chosen) would come before it. So such lines, the command's own
(:func:`tell`) and the library's logged warnings alike, are held by
:class:`HeldLines` while ``app.main`` runs the command and printed only after
it succeeded; a warning that explains a failure belongs in the error's message
instead. Commands that run until stopped (the worker, the relay) log as they
go, and are not held.
"""

from __future__ import annotations

import logging
import sys

_active: list[HeldLines] = []  # the collector of the command running now, if any


def tell(line: str) -> None:
    """A line for stderr besides the result (a warning, or a choice the command made):
    held while a command runs under :class:`HeldLines`, else printed at once."""
    if _active:
        _active[-1].lines.append(line)
    else:
        print(line, file=sys.stderr)


class HeldLines(logging.Handler):
    """While entered: collects :func:`tell`'s lines and every warning logged in the
    process (prefixed ``wanrl-s3: warning:``), one line each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append("wanrl-s3: warning: " + " ".join(record.getMessage().splitlines()))

    def __enter__(self) -> HeldLines:
        logging.getLogger().addHandler(self)
        _active.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        logging.getLogger().removeHandler(self)
        _active.remove(self)
