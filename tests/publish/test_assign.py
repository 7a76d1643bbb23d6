"""The public share rule (``wanrl_s3.ShareSelector``): its arguments, and placeholders as input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wanrl_s3 import ShareSelector, UsageError


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2, 2), r"rank must be below ranks \(2\), got 2"),
        ((-1, 2), "rank must be an integer >= 0"),
        ((True, 2), "rank must be an integer >= 0"),
        ((0, 0), "ranks must be an integer >= 1"),
        ((0, 2, "random"), "assign must be one of balanced, own"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ShareSelector(*args)


def test_meta_placeholders_get_the_same_owners_and_stream_as_the_real_tensors() -> None:
    """What a rank that holds only its share passes: the others have no storage to read."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    shapes = [tuple(int(n) for n in rng.integers(1, 40, rng.integers(0, 3))) for _ in range(60)]
    dtypes = [torch.bfloat16, torch.float32, torch.int64]
    stream = [(f"t{i}", torch.zeros(s, dtype=dtypes[i % 3])) for i, s in enumerate(shapes)]
    for rank in range(3):
        real, meta = ShareSelector(rank, 3), ShareSelector(rank, 3)
        owners = [real.owner(name, t) for name, t in stream]
        placeholders = [(name, t.to("meta")) for name, t in stream]
        picked = [name for name, _ in meta.select(placeholders)]
        assert picked == [name for (name, _), o in zip(stream, owners, strict=True) if o == rank]
        assert meta.stream_hash() == real.stream_hash() and meta.loads_bytes == real.loads_bytes
