"""Shared strategies for the codec tests: versions of a tensor as unsigned bit views."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from wanrl_s3.format.dtypes import DTYPES, DType

MASKS = ("none", "all", "single", "random")


def _elements(dt: DType, *, nonzero: bool) -> st.SearchStrategy[int]:
    """Bit patterns of ``dt``: any at all (NaN payloads, -0.0 ...), bools only 0/1."""
    if dt.name == "BOOL":
        return st.just(1) if nonzero else st.integers(0, 1)
    return st.integers(1 if nonzero else 0, np.iinfo(dt.bits).max)


@st.composite
def versions(draw: st.DrawFn, max_side: int = 9) -> tuple[DType, np.ndarray, np.ndarray]:
    """(dtype, old bits, new bits) with a change mask of every kind, any shape incl. 0-d."""
    dt = DTYPES[draw(st.sampled_from(sorted(DTYPES)))]
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=max_side))
    old = draw(hnp.arrays(dt.bits, shape, elements=_elements(dt, nonzero=False)))
    return dt, old, draw(changed_copy(old, dt))


@st.composite
def changed_copy(draw: st.DrawFn, old: np.ndarray, dt: DType) -> np.ndarray:
    """A copy of ``old`` with none, all, one or a random subset of elements changed."""
    kind = draw(st.sampled_from(MASKS))
    mask = np.zeros(old.shape, bool)
    if kind == "all":
        mask[...] = True
    elif kind == "single" and old.size:
        mask.reshape(-1)[draw(st.integers(0, old.size - 1))] = True
    elif kind == "random":
        mask = draw(hnp.arrays(np.bool_, old.shape))
    flips = draw(hnp.arrays(dt.bits, old.shape, elements=_elements(dt, nonzero=True)))
    return old ^ np.where(mask, flips, 0).astype(dt.bits)


def sparse_pair(
    rng: np.random.Generator, size: int, changed: int, dtype: type = np.uint16
) -> tuple[np.ndarray, np.ndarray]:
    """Random old bits and a copy with exactly ``changed`` elements XORed with nonzero words."""
    info = np.iinfo(dtype)
    old = rng.integers(0, info.max, size, dtype=dtype, endpoint=True)
    new = old.copy()
    where = rng.choice(size, changed, replace=False)
    new[where] ^= rng.integers(1, info.max, changed, dtype=dtype, endpoint=True)
    return old, new
