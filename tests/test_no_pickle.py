"""Invariant 6: nothing in the product can deserialize Python objects.

Tensors travel as raw little-endian bytes described by JSON; a snapshot must
never need pickle, torch.load, or numpy's object loading to be read.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(
    r"^\s*(import|from)\s+(c?pickle|dill|cloudpickle|joblib|shelve|marshal)\b"
    r"|\bpickle\.loads?\(|\btorch\.load\(|allow_pickle\s*=\s*True|\bcloudpickle\.",
    re.M,
)


def product_sources() -> list[Path]:
    return sorted([*(ROOT / "wanrl_s3").rglob("*.py"), *(ROOT / "integrations").rglob("*.py")])


def test_no_object_deserialization_in_the_product() -> None:
    sources = product_sources()
    assert len(sources) > 40
    offenders = [
        f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
        for p in sources
        for m in FORBIDDEN.finditer(p.read_text())
    ]
    assert offenders == []


def test_the_check_would_catch_it() -> None:
    for line in (
        "import pickle",
        "from cloudpickle import loads",
        "x = torch.load(f)",
        "np.load(f, allow_pickle=True)",
        "obj = pickle.loads(b)",
    ):
        assert FORBIDDEN.search(line), line
