"""``--help`` that shows every default and marks every required option.

A default written by hand into a help string drifts from the one argparse uses;
this formatter writes the real one, ``(default: 20)``, after the help of every
option that takes a value and has one, and ``(required)`` after a required
option's. An option whose default is computed at run time (``None`` here) says
in its own help what it falls back to, as ``(default: ...)``. Descriptions keep
their paragraphs (the module docstrings are written as paragraphs).
"""

from __future__ import annotations

import argparse

# Actions that take no value: their default is the flag's absence, nothing to show.
_NO_VALUE = (
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._StoreConstAction,
    argparse._HelpAction,
    argparse._VersionAction,
)


def shown_default(value: object) -> str:
    """A default as a user would type it: 3600 for 3600.0, ``A100-80GB:4`` for a pair."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    if isinstance(value, tuple | list):
        return ",".join(":".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in value)
    return str(value)


def has_default(action: argparse.Action) -> bool:
    """Whether ``action`` takes a value and has a default worth showing."""
    if isinstance(action, _NO_VALUE) or action.default in (None, argparse.SUPPRESS):
        return False
    return not (isinstance(action.default, tuple | list) and not action.default)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: X)`` and ``(required)`` to the options' help (see the module)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if text == argparse.SUPPRESS:
            return text
        extra = []
        if has_default(action) and "default" not in text:
            extra.append(f"default: {shown_default(action.default)}".replace("%", "%%"))
        if action.option_strings and action.required:
            extra.append("required")
        return f"{text} ({'; '.join(extra)})".strip() if extra else text
