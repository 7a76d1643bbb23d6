"""The public API is what ``__all__`` lists, and the code we ship as examples uses only it.

Integrations, examples and benchmarks are what users copy: if they reach into a
private module, a later move breaks them and teaches users to do the same. So
their imports are parsed and checked against the public surface, every public
name must resolve, the package root stays a handful of modules, and
``import wanrl_s3`` stays cheap (no boto3, numpy or torch until a name needs them).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = (
    "wanrl_s3",
    "wanrl_s3.cdn",
    "wanrl_s3.codec",
    "wanrl_s3.cost",
    "wanrl_s3.errors",
    "wanrl_s3.store",
    "wanrl_s3.testing",
)
CALLERS = ("integrations", "examples", "benchmarks")
ROOT_MODULES = {"__init__.py", "errors.py", "staleness.py", "units.py"}


def public_names(module: str) -> set[str]:
    return set(importlib.import_module(module).__all__)


def private_uses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for each import of wanrl_s3 that leaves the public surface."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "wanrl_s3" and alias.name not in PUBLIC_MODULES:
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "wanrl_s3":
                continue
            if node.module not in PUBLIC_MODULES:
                yield node.lineno, f"from {node.module} import ..."
                continue
            allowed = public_names(node.module)
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if alias.name.startswith("_") or (
                    alias.name not in allowed and submodule not in PUBLIC_MODULES
                ):
                    yield node.lineno, f"from {node.module} import {alias.name}"


def caller_sources() -> list[Path]:
    return sorted(p for top in CALLERS for p in (ROOT / top).rglob("*.py"))


def test_integrations_examples_and_benchmarks_use_only_the_public_api() -> None:
    sources = caller_sources()
    assert len(sources) >= 10  # the three folders were found
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sources
        for line, what in private_uses(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == [], "private imports (use names from a public __all__):\n" + "\n".join(
        offenders
    )


def doc_python_blocks() -> list[tuple[str, str]]:
    """(where, code) of every ```python block in the README and docs/ (tests/docs/blocks.py)."""
    from tests.docs.blocks import collect, pages

    return [(b.where, b.code) for b in collect(pages())[0] if b.kind == "python"]


def test_the_docs_python_examples_use_only_the_public_api() -> None:
    blocks = doc_python_blocks()
    assert len(blocks) >= 3
    offenders = [
        f"{where}: {what}" for where, code in blocks for _, what in private_uses(ast.parse(code))
    ]
    assert offenders == [], "docs import private modules:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("from wanrl_s3.fetch.watch import Watcher", True),
        ("import wanrl_s3.format.layout", True),
        ("import wanrl_s3.store.s3 as s3", True),
        ("from wanrl_s3.testing import synthetic", True),  # a module, not in __all__
        ("from wanrl_s3 import _LAZY", True),
        ("from wanrl_s3.codec import _pool", True),
        ("from wanrl_s3.errors import TransientStoreError, NoSuchError", True),
        ("def f():\n    from wanrl_s3.fleet import status", True),  # nested imports too
        ("from wanrl_s3 import Publisher, open_store", False),
        ("from wanrl_s3 import codec", False),  # a public subpackage
        ("import wanrl_s3, wanrl_s3.testing", False),
        ("from wanrl_s3.errors import UsageError", False),
        ("from wanrl_s3.codec import encode_delta_torch", False),
        ("from .versions import VersionMap", False),  # the integration's own modules
        ("from wanrl_s3_verl.config import ENGINE_KEY", False),
    ],
)
def test_the_import_check_flags_private_uses(source: str, flagged: bool) -> None:
    assert bool(list(private_uses(ast.parse(source)))) is flagged


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert len(names) == len(set(names)), f"{module}.__all__ lists a name twice"
    missing = [name for name in names if not _resolves(mod, name)]
    assert missing == [], f"{module}.__all__ names what it does not have"


def _resolves(mod: object, name: str) -> bool:
    try:
        getattr(mod, name)
    except (AttributeError, ImportError):
        return False
    return True


def test_the_top_level_lazy_map_and_all_agree() -> None:
    import wanrl_s3
    import wanrl_s3.errors

    lazy = set(wanrl_s3._LAZY)
    errors = set(wanrl_s3.errors.__all__) & set(wanrl_s3.__all__)
    assert lazy | errors == set(wanrl_s3.__all__)
    assert sorted(dir(wanrl_s3)) == sorted(wanrl_s3.__all__)
    with pytest.raises(AttributeError, match="no attribute 'layout'"):
        wanrl_s3.layout  # noqa: B018  # private modules are not reachable by name


def test_the_package_root_holds_only_the_modules_that_stand_alone() -> None:
    package = ROOT / "wanrl_s3"
    modules = {p.name for p in package.glob("*.py")}
    assert modules - ROOT_MODULES == set(), "put new modules in the folder of their data flow"
    folders = [p for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert len(folders) >= 10
    assert [p.name for p in folders if not (p / "__init__.py").is_file()] == []


# What ``import wanrl_s3`` (and each public subpackage) must not pull in.
HEAVY = ("boto3", "botocore", "torch", "numpy", "zstandard", "blake3", "ml_dtypes")
CHEAP_IMPORTS = {
    "wanrl_s3": HEAVY,
    "wanrl_s3.errors": HEAVY,
    "wanrl_s3.cost": HEAVY,
    "wanrl_s3.store": ("boto3", "botocore", "torch", "numpy"),
    "wanrl_s3.codec": ("boto3", "botocore", "torch"),
    "wanrl_s3.cdn": ("boto3", "botocore", "torch", "numpy", "cryptography"),
}


@pytest.mark.parametrize(("module", "forbidden"), CHEAP_IMPORTS.items())
def test_importing_the_api_stays_cheap(module: str, forbidden: tuple[str, ...]) -> None:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    loaded = {name.split(".")[0] for name in json.loads(out)}
    assert loaded & set(forbidden) == set()
