"""The verl adapter holds verl glue only: each of its modules imports verl or what verl brings.

A module of ``integrations/verl/wanrl_s3_verl`` that imports none of verl, Ray,
OmegaConf, Hydra or verl's TransferQueue does work that needs no verl, and
belongs in the core (``wanrl_s3``), where every trainer can call it (the trainer
core, ``wanrl_s3.trainer``, is what such work became). Nested imports count: a
module that imports verl's config library only where it converts verl's configs
is glue. This test needs no verl installed: it parses the sources.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "integrations" / "verl" / "wanrl_s3_verl"
VERL_ONLY = frozenset({"verl", "ray", "omegaconf", "hydra", "transfer_queue"})
# Modules that know verl without importing it, each with the reason it may not import it.
WITHOUT_VERL = {
    "estimate.py": "plans a verl run from its YAML (python -m wanrl_s3_verl.estimate) "
    "where verl is not installed: a laptop before the run",
}


def verl_imports(tree: ast.AST) -> set[str]:
    """The verl-only packages ``tree`` imports, at any depth."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & VERL_ONLY


def only_a_docstring(tree: ast.Module) -> bool:
    return all(
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in tree.body
    )


def test_every_adapter_module_imports_verl_or_what_verl_brings() -> None:
    modules = sorted(ADAPTER.glob("*.py"))
    assert {"backend.py", "config.py", "sampler.py", "message_queue.py"} <= {
        p.name for p in modules
    }
    no_verl = []
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if only_a_docstring(tree) or path.name in WITHOUT_VERL:
            continue
        if not verl_imports(tree):
            no_verl.append(path.name)
    assert no_verl == [], (
        f"{', '.join(no_verl)} import(s) nothing of verl: work that needs no verl belongs in "
        "the core (wanrl_s3), where every trainer can use it"
    )


@pytest.mark.parametrize("name", sorted(WITHOUT_VERL))
def test_the_modules_allowed_without_verl_still_need_that_allowance(name: str) -> None:
    tree = ast.parse((ADAPTER / name).read_text(encoding="utf-8"))
    assert not verl_imports(tree), f"{name} imports verl now: drop it from WITHOUT_VERL"


@pytest.mark.parametrize(
    ("source", "glue"),
    [
        ("from verl.checkpoint_engine.base import CheckpointEngine", True),
        ("import ray", True),
        ("def f():\n    from omegaconf import OmegaConf", True),  # a nested import counts
        ("import hydra.core", True),
        ("from transfer_queue import KVBatchMeta", True),
        ("from wanrl_s3 import TrainerPublisher", False),
        ("import torch\nimport threading", False),
        ("from .clock import ClockTicker", False),  # a sibling that imports ray is not enough
    ],
)
def test_the_scan_tells_glue_from_work_that_needs_no_verl(source: str, glue: bool) -> None:
    assert bool(verl_imports(ast.parse(source))) is glue
