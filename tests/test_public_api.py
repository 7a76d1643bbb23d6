"""The public API is what ``__all__`` lists, and the code we ship as examples uses only it.

Integrations, examples and benchmarks are what users copy: if they reach into a
private module, a later move breaks them and teaches users to do the same. So
their imports are parsed and checked against the public surface, every public
name must resolve, the package root stays a handful of modules, and
``import wanrl_s3`` stays cheap (no boto3, numpy or torch until a name needs them).
"""

from __future__ import annotations

import abc
import ast
import dataclasses
import enum
import functools
import importlib
import inspect
import json
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

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
# the root holds the API, the error tree, the staleness rule, units, and the lazy-export helper
ROOT_MODULES = {"__init__.py", "_exports.py", "errors.py", "staleness.py", "units.py"}


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


def names_used_from(module: str, tree: ast.AST) -> set[str]:
    """The names ``tree`` takes from ``module``: ``from module import x`` and ``module.x``."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == module:
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == module:
            used.add(node.attr)
    return used


def test_every_planner_name_has_a_user() -> None:
    """``wanrl_s3.cost.__all__`` is what a planner's user calls, not every formula: each
    name is used by an integration, example or benchmark, named in the docs as
    ``wanrl_s3.cost.<name>``, re-exported by ``wanrl_s3``, or part of the signature of a
    name that is (a type it takes or returns)."""
    import re

    import wanrl_s3
    import wanrl_s3.cost as cost

    used = set(wanrl_s3.__all__)
    for path in caller_sources():
        used |= names_used_from("wanrl_s3.cost", ast.parse(path.read_text(encoding="utf-8")))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    used |= {m for page in pages for m in re.findall(r"wanrl_s3\.cost\.(\w+)", page.read_text())}
    public = [getattr(cost, name) for name in used & set(cost.__all__)]
    signatures = " ".join(str(inspect.signature(value)) for value in public if callable(value))
    unused = [n for n in cost.__all__ if n not in used and not re.search(rf"\b{n}\b", signatures)]
    assert unused == [], "wanrl_s3.cost exports what no user calls: drop it from __all__"


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
        ("from wanrl_s3 import _PUBLIC", True),
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


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_dir_lists_exactly_the_public_names(module: str) -> None:
    mod = importlib.import_module(module)
    assert sorted(dir(mod)) == sorted(mod.__all__)


# The packages whose public names come from one table (``_exports.attach``).
LAZY_PACKAGES = ("wanrl_s3", "wanrl_s3.codec", "wanrl_s3.testing")


@pytest.mark.parametrize("module", LAZY_PACKAGES)
def test_all_is_the_lazy_table_and_type_checkers_see_the_same_names(module: str) -> None:
    """``__all__`` is the table's keys, and the ``if TYPE_CHECKING:`` block imports exactly
    the table's names from the table's modules, as ``name as name`` (an explicit re-export,
    so that ``mypy --strict`` in a user's code accepts ``from wanrl_s3 import Publisher``)."""
    mod = importlib.import_module(module)
    assert mod.__all__ == sorted(mod._PUBLIC)
    tree = ast.parse(Path(mod.__file__).read_text(encoding="utf-8"))
    checked = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    assert len(checked) == 1
    seen: dict[str, str] = {}
    for node in checked[0].body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname == alias.name, f"write `{alias.name} as {alias.name}`"
            seen[alias.name] = "." * node.level + (node.module or "")
    assert seen == mod._PUBLIC
    # the lazy hooks sit in the ``else:``: a type checker that saw ``__getattr__`` would
    # accept any misspelt name as ``Any``
    hooks = [ast.unparse(node) for node in checked[0].orelse]
    renamed = ", _RENAMED" if hasattr(mod, "_RENAMED") else ""
    assert hooks == [f"__getattr__, __dir__, __all__ = attach(__name__, _PUBLIC{renamed})"]
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        mod.nothing_here  # noqa: B018


@pytest.mark.parametrize(("old", "new"), [("NodeShare", "HostCache"), ("resume", "adopt_newest"),
                                          ("resume_point", "adoption_point"),
                                          ("ResumePoint", "AdoptionPoint")])  # fmt: skip
def test_a_renamed_name_still_imports_warning_once_and_is_not_listed(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wanrl_s3
    from wanrl_s3 import _exports

    monkeypatch.setattr(_exports, "_warned", set())
    said = rf"wanrl_s3\.{old} is deprecated: it is now wanrl_s3\.{new} "
    with pytest.warns(DeprecationWarning, match=said):
        assert getattr(wanrl_s3, old) is getattr(wanrl_s3, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(wanrl_s3, old) is getattr(wanrl_s3, new)  # once per process
    assert old not in wanrl_s3.__all__ and old not in dir(wanrl_s3)


def test_private_modules_are_not_reachable_from_the_api_by_name() -> None:
    import wanrl_s3

    with pytest.raises(AttributeError, match="no attribute 'layout'"):
        wanrl_s3.layout  # noqa: B018


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_is_documented(module: str) -> None:
    """Functions and classes carry a docstring; a constant a ``#:`` comment on the line
    above its assignment (what Sphinx's autodoc reads)."""
    mod = importlib.import_module(module)
    undocumented = [name for name in mod.__all__ if not _documented(name, getattr(mod, name))]
    assert undocumented == [], f"{module}: document these (a docstring, or #: for a constant)"


def _documented(name: str, value: object) -> bool:
    if inspect.isclass(value) or (callable(value) and inspect.isfunction(inspect.unwrap(value))):
        doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
        # a dataclass without a docstring gets its signature as one: not documentation
        return bool(doc and doc.strip()) and not doc.startswith(f"{value.__name__}(")
    return _constant_comment(name, value)


def _constant_comment(name: str, value: object) -> bool:
    """Whether the module that assigns ``name`` (to this very object) writes ``#:`` above it."""
    for path in sorted((ROOT / "wanrl_s3").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if name not in text:
            continue
        lines = text.splitlines()
        for node in ast.parse(text).body:
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if not (isinstance(target, ast.Name) and target.id == name):
                continue
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if vars(importlib.import_module(dotted)).get(name) is value:
                return lines[node.lineno - 2].lstrip().startswith("#:")
    return False


def test_the_documentation_check_can_fail() -> None:
    @dataclasses.dataclass
    class Bare:
        x: int

    def bare() -> None:
        pass

    assert not _documented("Bare", Bare)
    assert not _documented("bare", bare)
    assert not _documented("NOT_ASSIGNED_ANYWHERE", object())
    assert _documented("DELTA_MODES", importlib.import_module("wanrl_s3").DELTA_MODES)
    assert not _constant_comment("FORMAT_VERSION", 1)  # the codec's, with no #: above it


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_member_of_a_public_class_is_documented(module: str) -> None:
    """Each class in a public ``__all__`` documents its public methods, classmethods,
    staticmethods and properties: those whose name has no leading underscore, defined
    by the class or by any of its bases that wanrl_s3 defines (a private base too: its
    members are the public class's). Names from builtins and the standard library
    (``__init__``, what ``dataclass`` generates, Enum members, NamedTuple fields,
    Protocol plumbing) are not ours and are not checked, and nor are data attributes.

    A member needs a docstring of its own. ``inspect.getdoc`` would lend it the one of
    the member it overrides, which describes the base's behaviour, not the override's
    (an observer hook that records a metric where the base ignores the event). The one
    exception: an override of an abstract method, or of a member of a ``Protocol`` the
    class inherits from, may go without, when that member (the nearest one it overrides)
    is documented: the base's docstring is the contract every implementation fulfils. A
    class that only has a Protocol's shape, without naming it as a base, documents its
    own members: nothing ties them to that contract."""
    mod = importlib.import_module(module)
    classes = [value for value in map(mod.__getattribute__, mod.__all__) if inspect.isclass(value)]
    undocumented = sorted({name for cls in classes for name in undocumented_members(cls)})
    assert undocumented == [], f"{module}: document these ({len(undocumented)})"


def undocumented_members(cls: type, package: str = "wanrl_s3") -> Iterator[str]:
    """``Owner.name`` of each public method or property of ``cls`` that the test above
    finds undocumented, looking only at the classes of ``cls.__mro__`` from ``package``."""
    for owner in cls.__mro__:
        if not _defined_in(owner, package):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_") or _member_function(value) is None or _has_doc(value):
                continue
            if not _fulfils_a_documented_contract(owner, name):
                yield f"{owner.__module__}.{owner.__qualname__}.{name}"


def _defined_in(cls: type, package: str) -> bool:
    return cls.__module__ == package or cls.__module__.startswith(f"{package}.")


def _member_function(value: object) -> Callable[..., object] | None:
    """The function behind a method, classmethod, staticmethod, property (its getter),
    cached property, or decorated function (a pytest fixture); None for data."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    elif isinstance(value, property):
        value = value.fget
    elif isinstance(value, functools.cached_property):
        value = value.func
    function = inspect.unwrap(value) if callable(value) else None
    return function if inspect.isfunction(function) else None


def _has_doc(value: object) -> bool:
    """Whether a member (as :func:`_member_function` takes it) carries a docstring: its
    function's, or a property's own (``property(getter, doc=...)``)."""
    doc = (
        value.__doc__
        if isinstance(value, property)
        else getattr(_member_function(value), "__doc__", None)
    )
    return bool(doc and doc.strip())


def _fulfils_a_documented_contract(owner: type, name: str) -> bool:
    """Whether ``owner.name`` overrides a documented abstract method, or a documented
    member of a ``Protocol`` that ``owner`` inherits from."""
    for base in owner.__mro__[1:]:
        if name not in vars(base):
            continue
        value = vars(base)[name]
        contract = getattr(value, "__isabstractmethod__", False) or getattr(
            base, "_is_protocol", False
        )
        return bool(contract) and _member_function(value) is not None and _has_doc(value)
    return False


def test_the_member_documentation_check_can_fail() -> None:
    class Contract(abc.ABC):
        @abc.abstractmethod
        def fetch(self) -> int:
            """The contract's docstring."""

        def hook(self) -> int:
            """Ignores the event: 0 recorded."""
            return 0

        @abc.abstractmethod
        def bare(self) -> None: ...

    class Clocklike(Protocol):
        def now_s(self) -> float:
            """Seconds since the epoch."""

    class Implementation(Contract, Clocklike):
        def fetch(self) -> int:  # may inherit the abstract method's docstring
            return 1

        def hook(self) -> int:  # changes behaviour: needs its own
            return 1

        def bare(self) -> None:  # the abstract method has none to lend
            pass

        def now_s(self) -> float:  # may inherit the Protocol member's docstring
            return 0.0

        @property
        def size_bytes(self) -> int:
            return 0

        @classmethod
        def make(cls) -> Implementation:
            return cls()

        @staticmethod
        def helper() -> None:
            pass

        @functools.cached_property
        def cached(self) -> int:
            return 0

        def _private(self) -> None:
            pass

        limit_bytes = 10  # data, not a member to document
        alias = property(lambda self: self.limit_bytes, doc="``limit_bytes``, by its old name.")

    @dataclasses.dataclass(frozen=True)
    class Config:
        """A config."""

        x: int = 0

    class Colour(enum.Enum):
        """A colour."""

        RED = 1

    class Pair(NamedTuple):
        """A pair."""

        a: int
        b: int

    class Structural:  # has Clocklike's shape without inheriting it
        def now_s(self) -> float:
            return 0.0

    def flagged(cls: type) -> list[str]:
        return sorted(".".join(n.rsplit(".", 2)[1:]) for n in undocumented_members(cls, __name__))

    names = ("bare", "cached", "helper", "hook", "make", "size_bytes")
    assert flagged(Implementation) == ["Contract.bare", *(f"Implementation.{n}" for n in names)]
    assert flagged(Structural) == ["Structural.now_s"]
    assert flagged(Config) == flagged(Colour) == flagged(Pair) == []
    assert flagged(dict) == []  # not ours: nothing of it is checked
    # wanrl_s3's own: a private base's members count for the public class that inherits them
    from wanrl_s3.metrics.exposition import RegisteredMetrics

    assert _defined_in(RegisteredMetrics, "wanrl_s3")
    assert not _defined_in(abc.ABC, "wanrl_s3")


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
