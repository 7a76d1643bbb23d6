"""A delta base adopted from the store a tensor at a time: exact; a damaged one: a keyframe.

``wanrl-s3 publish`` without ``--base`` streams the newest version in while it
encodes (StreamedBase behind Publisher.adopt_base(borrow=True)); what it
publishes must rebuild exactly, and a base that does not verify must not end
up in a delta.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.cli.app import main
from wanrl_s3.fetch.streamed_base import StreamedBase
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.store import open_store
from wanrl_s3.testing import nudge_state


def state(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        f"w{i}": (rng.standard_normal((64, 256), np.float32) * 0.05).astype(ml_dtypes.bfloat16)
        for i in range(4)
    }


def publish(src: Path, url: str, endpoint: str, version: int) -> int:
    return main(["publish", str(src), "--store", url, "--endpoint-url", endpoint,
                 "--version", str(version), "--json"])  # fmt: skip


def two_versions(tmp_path: Path, seed: int) -> tuple[dict[str, np.ndarray], ...]:
    v1 = state(seed)
    v2 = nudge_state(v1, 0.02, seed=seed + 1)
    write_file(tmp_path / "v1.safetensors", v1)
    write_file(tmp_path / "v2.safetensors", v2)
    return v1, v2


def test_delta_against_a_streamed_base_rebuilds_exactly(
    s3_url: str, moto_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = two_versions(tmp_path, 0)
    assert publish(tmp_path / "v1.safetensors", s3_url, moto_endpoint, 1) == 0
    assert publish(tmp_path / "v2.safetensors", s3_url, moto_endpoint, 2) == 0
    assert '"kind": "delta"' in capsys.readouterr().out
    store = open_store(s3_url, endpoint_url=moto_endpoint)
    with Subscriber(store) as sub:
        got = sub.fetch(2)
        assert got.path == (1, 2)
        base = StreamedBase(sub, 1)
        base.load("w1")
        assert base["w1"].tobytes() == v1["w1"].tobytes()
        base.drop("w1")
        assert not base["w1"].any()  # its memory is gone
    assert all(got.tensors[n].tobytes() == a.tobytes() for n, a in v2.items())


def test_a_damaged_base_makes_the_publication_a_keyframe(
    s3_url: str, moto_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, v2 = two_versions(tmp_path, 2)
    assert publish(tmp_path / "v1.safetensors", s3_url, moto_endpoint, 1) == 0
    store = open_store(s3_url, endpoint_url=moto_endpoint)
    with Subscriber(store) as sub:
        m = sub.manifest(1)
    seg = m.by_name["w2"].segments[0]
    key = m.payload_key(seg.key)
    data = bytearray(store.get_bytes(key))
    data[seg.offset + 10] ^= 0x01
    store.put_bytes(key, bytes(data))
    capsys.readouterr()
    assert publish(tmp_path / "v2.safetensors", s3_url, moto_endpoint, 2) == 0
    out = capsys.readouterr()
    assert '"kind": "full"' in out.out and "does not verify" in out.err
    with Subscriber(store) as sub:
        got = sub.fetch(2)
    assert all(got.tensors[n].tobytes() == a.tobytes() for n, a in v2.items())
