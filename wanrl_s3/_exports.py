"""A package's public names from one table: its ``__getattr__``, ``__dir__`` and ``__all__``.

A public package (``wanrl_s3``, ``wanrl_s3.codec``, ``wanrl_s3.testing``) maps each
public name to the private module that defines it, and :func:`attach` turns that one
table into the module hooks of PEP 562: a name is imported on first use (so
``import wanrl_s3`` never loads boto3, and ``wanrl_s3.codec`` never torch), ``dir()``
lists the public names and nothing else, and ``__all__`` is the table's keys, never a
second list that could drift from it. Type checkers read the package's
``if TYPE_CHECKING:`` imports instead (``tests/test_public_api.py`` checks that they
match the table).

A public name that was renamed keeps working under its old spelling for a while:
``attach``'s ``renamed`` table (``{old: new}``) resolves the old name to the new
one's object with a :class:`DeprecationWarning`, once per process, and leaves it out
of ``dir()`` and ``__all__``; :func:`renamed_keywords` does the same for a class's
renamed constructor keyword and attribute.
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

_T = TypeVar("_T", bound=type)
_warned: set[str] = set()


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """One DeprecationWarning per process for each old spelling a caller still uses."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(
        f"{old} is deprecated: it is now {new} (the old name goes away in a later release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def attach(
    package: str, table: Mapping[str, str], renamed: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, from ``{name: ".module"}``;
    ``renamed`` (``{old: new}``, each ``new`` in the table): the old spellings, which
    warn and are never listed."""
    names = sorted(table)
    old_names = dict(renamed or {})

    def __getattr__(name: str) -> Any:
        if name in old_names:
            warn_renamed(f"{package}.{name}", f"{package}.{old_names[name]}")
            return __getattr__(old_names[name])
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, list(names)


def renamed_keywords(renamed: Mapping[str, str], *, attributes: bool = True) -> Callable[[_T], _T]:
    """A class decorator: each old keyword of ``renamed`` (``{old: new}``) is still taken
    by the constructor, and (``attributes``) read as an attribute, as the new one, with a
    warning.

    For a frozen dataclass whose field was renamed: ``dataclasses.replace`` and the
    generated ``__init__`` see only the new field.
    """

    def decorate(cls: _T) -> _T:
        init = vars(cls)["__init__"]  # the class's own, as generated or written

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            for old, new in renamed.items():
                if old in kwargs:
                    warn_renamed(f"{cls.__name__}({old}=)", f"{cls.__name__}({new}=)")
                    if new in kwargs:
                        raise TypeError(f"{cls.__name__}: give {new} alone, not {old} too")
                    kwargs[new] = kwargs.pop(old)
            init(self, *args, **kwargs)

        setattr(cls, "__init__", __init__)  # noqa: B010 - a method, replaced on the class
        for old, new in renamed.items() if attributes else ():
            setattr(cls, old, _renamed_attribute(cls.__name__, old, new))
        return cls

    return decorate


def _renamed_attribute(owner: str, old: str, new: str) -> property:
    def read(self: Any) -> Any:
        warn_renamed(f"{owner}.{old}", f"{owner}.{new}")
        return getattr(self, new)

    return property(read, doc=f"Deprecated: {new}.")
