"""Host buffers: one reusable copy of the published weights, cast as the publisher casts."""

from __future__ import annotations

import torch

from wanrl_s3_verl.host_copy import HostBuffers

from .engines import expected, gen, model, step
from .weights import digests


def test_a_fill_copies_and_casts_what_verl_sends_and_owns_its_memory() -> None:
    weights = model(big=1000)
    buffers = HostBuffers("bf16")
    filled = buffers.fill(gen(weights))
    assert list(filled) == list(weights)  # verl's order
    assert digests(filled) == expected(weights)  # floating in bf16, integers as they are
    step(weights, 1)  # the trainer moves on: the copy does not
    assert digests(filled) != expected(weights)
    kept = HostBuffers("keep").fill(gen(weights))
    assert {n: t.dtype for n, t in kept.items()} == {n: t.dtype for n, t in weights.items()}


def test_buffers_are_reused_while_shapes_hold_and_follow_verl_when_they_change() -> None:
    weights = model(big=1000)
    buffers = HostBuffers("bf16")
    first = {n: t.data_ptr() for n, t in buffers.fill(gen(weights)).items()}
    step(weights, 1)
    again = buffers.fill(gen(weights))
    assert {n: t.data_ptr() for n, t in again.items()} == first  # overwritten in place
    assert digests(again) == expected(weights)
    # a tensor changes shape, one is gone, one is new: only those are (re)allocated
    weights["model.embed.weight"] = torch.randn(2000)
    del weights["model.position_ids"]
    weights["lm_head.weight"] = torch.randn(10, 10)
    changed = buffers.fill(gen(weights))
    assert list(changed) == list(weights) and digests(changed) == expected(weights)
    ptrs = {n: t.data_ptr() for n, t in changed.items()}
    assert ptrs["model.layers.0.mlp.weight"] == first["model.layers.0.mlp.weight"]
    assert ptrs["model.embed.weight"] != first["model.embed.weight"]
    assert buffers.nbytes == sum(t.numel() * t.element_size() for t in changed.values())
