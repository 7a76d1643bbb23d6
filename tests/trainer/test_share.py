"""A rank's share, picked as the stream goes past, is the publisher's own assignment."""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import torch

from wanrl_s3 import ShardedPublisher, ShareSelector
from wanrl_s3.store import open_store
from wanrl_s3.trainer.host_copy import published_dtype
from wanrl_s3.trainer.share import BalancedShare


def share_of(rank: int, ranks: int, assign: str = "balanced") -> BalancedShare | None:
    """The share the trainer core asks a rank's ShardedPublisher for."""
    publisher = ShardedPublisher(
        open_store("memory://share"), rank=rank, ranks=ranks, run_id="r", assign=assign
    )
    selector = publisher.share_selector()
    return None if selector is None else BalancedShare(selector)


def test_the_balanced_share_is_the_publishers_assignment_of_the_published_tensors() -> None:
    """The host copy picks its share (from fp32 and int64 tensors) before the publisher
    does (from the published ones: fp32 cast to bf16, int64 kept): the picks must be
    the same, and the others placeholders of the published shape and dtype."""
    rng = random.Random(3)
    for n in (1, 2, 3, 4, 7):
        kinds = [torch.float32, torch.float32, torch.int64]
        stream = [
            (f"t{i}", torch.empty(rng.choice([1, 32, 2048, 1 << 19]), dtype=rng.choice(kinds)))
            for i in range(200)
        ]
        target = {name: published_dtype(name, t, "bf16") for name, t in stream}
        published = [(name, t.to(target[name])) for name, t in stream]
        for rank in range(n):
            core = {name for name, _ in ShareSelector(rank, n, "balanced").select(published)}
            share = share_of(rank, n)
            assert share is not None
            others = {name: share.other(name, t, target[name]) for name, t in stream}
            assert {name for name, p in others.items() if p is None} == core, f"{rank} of {n}"
            for (name, t), (_, want) in zip(stream, published, strict=True):
                placeholder = others[name]
                if placeholder is not None:
                    assert placeholder.is_meta and placeholder.dtype == want.dtype
                    assert placeholder.shape == t.shape


def test_numpy_placeholders_hold_no_data_and_own_mode_has_no_share() -> None:
    share = share_of(1, 2)
    assert share is not None
    big = np.ones((1000, 1000), dtype=np.float32)
    target = published_dtype("w", big, "bf16")
    assert target == np.dtype(ml_dtypes.bfloat16)
    assert share.other("a", big, target) is not None  # rank 0 takes the first tensor
    assert share.other("b", big, target) is None  # and rank 1 the second
    stand_in = share.other("c", np.ones(10, np.float32), target)
    assert stand_in is not None and stand_in.dtype == target and stand_in.shape == (10,)
    assert stand_in.strides == (0,)  # a view of one element: no storage of its own
    assert share_of(0, 2, assign="own") is None  # each rank publishes all it is given
