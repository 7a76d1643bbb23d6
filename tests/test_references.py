"""Every ``wanrl_s3.<name>`` that the package's docstrings and comments write resolves.

A module that moves leaves its old dotted path behind in prose (``wanrl_s3.files``,
``wanrl_s3.watch.Watcher``); a reader who follows it finds nothing. So each dotted
reference is imported here: the longest importable prefix, then attributes.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOTTED = re.compile(r"\bwanrl_s3(?:\.\w+)+")
# dotted strings that name no Python object: safetensors metadata keys and a logger
NOT_PYTHON = {"wanrl_s3.version", "wanrl_s3.run_id", "wanrl_s3.worker"}


def resolves(reference: str) -> bool:
    parts = reference.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for attribute in parts[k:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return False
        return True
    return False


def test_every_dotted_reference_in_the_package_resolves() -> None:
    sources = sorted((ROOT / "wanrl_s3").rglob("*.py"))
    assert len(sources) > 100
    stale = [
        f"{path.relative_to(ROOT)}:{number}: {reference}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for reference in DOTTED.findall(line)
        if reference not in NOT_PYTHON and not resolves(reference)
    ]
    assert stale == [], "references to names that do not exist:\n" + "\n".join(stale)


@pytest.mark.parametrize(
    ("reference", "found"),
    [
        ("wanrl_s3.pull_to_file", True),
        ("wanrl_s3.cost.model_size.params_from_hf_config", True),
        ("wanrl_s3.files.pull_to_file", False),  # no such module
        ("wanrl_s3.watch.Watcher", False),
        ("wanrl_s3.cost.no_such_formula", False),  # the module exists, the name does not
    ],
)
def test_the_reference_check_can_fail(reference: str, found: bool) -> None:
    assert resolves(reference) is found
