"""The publisher module's private members stay private to it.

``ShardedPublisher`` publishes with the single publisher's steps, through
:class:`~wanrl_s3.publish.publisher.VersionWriter`'s public methods. Reaching for a
``_private`` method or attribute of a class of publisher.py from another module
(``self._publisher._begin(...)``) couples the two to internals that may change
under them. This scan parses every module of the package, the integrations, the
examples and the benchmarks, and fails on such a reach, and on an import of a
private name of the module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLISHER = ROOT / "wanrl_s3" / "publish" / "publisher.py"
SCANNED = ("wanrl_s3", "integrations", "examples", "benchmarks")


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def private_members(tree: ast.AST) -> set[str]:
    """The private names a class of ``tree`` defines: methods, class attributes, ``self._x``."""
    names: set[str] = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {name for name in names if is_private(name)}


def reaches(tree: ast.AST, members: set[str]) -> Iterator[tuple[int, str]]:
    """(line, what) for each use of ``members`` on anything but ``self``/``cls``, and each
    import of a private name from the publisher module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in members:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                yield node.lineno, f"{ast.unparse(owner)}.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("publisher"):
            for alias in node.names:
                if is_private(alias.name):
                    yield node.lineno, f"from {'.' * node.level}{node.module} import {alias.name}"


def scanned_sources() -> list[Path]:
    found = (p for top in SCANNED for p in (ROOT / top).rglob("*.py"))
    return sorted(p for p in found if p != PUBLISHER)


def test_no_module_reaches_into_the_publishers_private_members() -> None:
    members = private_members(ast.parse(PUBLISHER.read_text(encoding="utf-8")))
    assert {"_base", "_writer", "_check_claimable", "_encode"} <= members  # the scan sees them
    sources = scanned_sources()
    assert ROOT / "wanrl_s3" / "publish" / "shard.py" in sources
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sources
        for line, what in reaches(ast.parse(path.read_text(encoding="utf-8")), members)
    ]
    assert offenders == [], "private members of publish/publisher.py used elsewhere:\n" + (
        "\n".join(offenders)
    )


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("base, held = self._publisher._begin(version)", True),  # what shard.py once did
        ("manifest = pub._sign(manifest)", True),
        ("from .publisher import _Base, _Draft", True),
        ("from wanrl_s3.publish.publisher import _is_ours", True),
        ("publisher._writer.begin(3)", True),
        ("self._base = None", False),  # a class's own private attribute
        ("self._writer.begin(version)", False),  # the shared steps' public methods
        ("from .publisher import VersionWriter", False),
        ("x.__class__", False),
    ],
)
def test_the_scan_flags_reaches_into_private_members(source: str, flagged: bool) -> None:
    members = {"_begin", "_sign", "_base", "_writer"}
    assert bool(list(reaches(ast.parse(source), members))) is flagged
