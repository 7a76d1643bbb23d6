"""The README says what `make test` runs (its code blocks run in tests/docs/)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _recipe(makefile: str, target: str) -> str:
    """The command lines of one Makefile target."""
    body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert body, f"no target {target} in the Makefile"
    return body.group(1)


def test_readme_says_what_make_test_leaves_out() -> None:
    """`make test` deselects the slow tests: the README says so and names `make test-slow`."""
    makefile = (README.parent / "Makefile").read_text()
    text = README.read_text()
    assert '-m "not slow"' in _recipe(makefile, "test")
    assert "-m slow" in _recipe(makefile, "test-slow")
    line = next(line for line in text.splitlines() if line.startswith("make test "))
    assert "not marked slow" in line and "whole suite" not in line
    assert "make test-slow" in text
