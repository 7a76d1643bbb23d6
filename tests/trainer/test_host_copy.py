"""Host buffers: one reusable copy of the published weights, cast as the publisher casts."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from tests.trainer.weights import as_published, digests, gen, model, step
from wanrl_s3.errors import UsageError
from wanrl_s3.trainer.host_copy import HostBuffers, cast_stream


def expected(weights: dict[str, torch.Tensor]) -> dict[str, str]:
    return digests(as_published(weights))


def test_a_fill_copies_and_casts_what_verl_sends_and_owns_its_memory() -> None:
    weights = model(big=1000)
    buffers = HostBuffers("bf16")
    filled = buffers.fill(gen(weights))
    assert list(filled) == list(weights)  # the caller's order
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


def test_numpy_arrays_are_copied_and_cast_like_torch_tensors() -> None:
    weights = {"w": np.linspace(-1, 1, 1000, dtype=np.float32), "ids": np.arange(7)}
    buffers = HostBuffers("bf16")
    filled = buffers.fill(weights.items())
    assert filled["w"].dtype == np.dtype(ml_dtypes.bfloat16) and filled["ids"].dtype == np.int64
    torch_cast = torch.from_numpy(weights["w"]).to(torch.bfloat16).view(torch.int16).numpy()
    assert np.array_equal(filled["w"].view(np.int16), torch_cast)  # rounded as torch rounds
    first = filled["w"].ctypes.data
    weights["w"] += 1  # the caller moves on: the copy does not
    assert float(filled["w"][0]) == -1.0
    assert buffers.fill(weights.items())["w"].ctypes.data == first  # reused in place
    assert buffers.nbytes == 1000 * 2 + 7 * 8


def test_the_synchronous_path_casts_without_keeping_a_copy() -> None:
    weights = model(big=1000)
    cast = dict(cast_stream(gen(weights), "bf16"))
    assert digests(cast) == expected(weights)
    kept = dict(cast_stream(weights.items(), "keep"))
    assert all(kept[n] is t for n, t in weights.items())  # nothing to cast: the tensor itself


def test_what_is_not_a_tensor_or_a_dtype_is_refused_by_name() -> None:
    with pytest.raises(UsageError, match=r"layer\.0: expected a numpy array or torch tensor"):
        HostBuffers("keep").fill([("layer.0", [1.0, 2.0])])
    with pytest.raises(UsageError, match="dtype must be one of bf16, keep"):
        HostBuffers("fp8")
