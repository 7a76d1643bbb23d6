"""A package's public names from one table: its ``__getattr__``, ``__dir__`` and ``__all__``.

A public package (``wanrl_s3``, ``wanrl_s3.codec``, ``wanrl_s3.testing``) maps each
public name to the private module that defines it, and :func:`attach` turns that one
table into the module hooks of PEP 562: a name is imported on first use (so
``import wanrl_s3`` never loads boto3, and ``wanrl_s3.codec`` never torch), ``dir()``
lists the public names and nothing else, and ``__all__`` is the table's keys, never a
second list that could drift from it. Type checkers read the package's
``if TYPE_CHECKING:`` imports instead (``tests/test_public_api.py`` checks that they
match the table).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def attach(
    package: str, table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, from ``{name: ".module"}``."""
    names = sorted(table)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, list(names)
