"""A delta base adopted from the store a tensor at a time: exact; a damaged one: a keyframe.

``wanrl-s3 publish`` without ``--base`` streams the newest version in while it
encodes (StreamedBase behind Publisher.adopt_base(borrow=True)); what it
publishes must rebuild exactly, and a base that does not verify must not end
up in a delta.
"""

from __future__ import annotations

import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.cli.app import main
from wanrl_s3.errors import VerificationError
from wanrl_s3.fetch.streamed_base import StreamedBase
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import FaultProxy, nudge_state


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


def damage(store: ObjectStore, version: int, name: str) -> None:
    """Flip one stored bit of tensor ``name`` of ``version`` in the store."""
    with Subscriber(store) as sub:
        m = sub.manifest(version)
    seg = m.by_name[name].segments[0]
    key = m.payload_key(seg.key)
    data = bytearray(store.get_bytes(key))
    data[seg.offset + 10] ^= 0x01
    store.put_bytes(key, bytes(data))


def test_delta_against_a_streamed_base_rebuilds_exactly(
    s3_url: str, s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = two_versions(tmp_path, 0)
    assert publish(tmp_path / "v1.safetensors", s3_url, s3_endpoint, 1) == 0
    assert publish(tmp_path / "v2.safetensors", s3_url, s3_endpoint, 2) == 0
    assert '"kind": "delta"' in capsys.readouterr().out
    store = open_store(s3_url, endpoint_url=s3_endpoint)
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
    s3_url: str, s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, v2 = two_versions(tmp_path, 2)
    assert publish(tmp_path / "v1.safetensors", s3_url, s3_endpoint, 1) == 0
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    damage(store, 1, "w2")
    capsys.readouterr()
    assert publish(tmp_path / "v2.safetensors", s3_url, s3_endpoint, 2) == 0
    out = capsys.readouterr()
    assert '"kind": "full"' in out.out and "does not verify" in out.err
    with Subscriber(store) as sub:
        got = sub.fetch(2)
    assert all(got.tensors[n].tobytes() == a.tobytes() for n, a in v2.items())


def published_base(tmp_path: Path, url: str, endpoint: str, seed: int) -> dict[str, np.ndarray]:
    """v1 of ``two_versions`` published (a keyframe): what a StreamedBase reads."""
    v1, _ = two_versions(tmp_path, seed)
    assert publish(tmp_path / "v1.safetensors", url, endpoint, 1) == 0
    return v1


def filled(base: StreamedBase) -> set[str]:
    """The tensors whose arrays hold data (a scratch array reads zeros until fetched)."""
    return {n for n in base if base[n].any()}


def wait_until(predicate, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_next_tensors_are_fetched_ahead_within_the_bound(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    v1 = published_base(tmp_path, s3_url, s3_endpoint, 4)
    one = v1["w0"].nbytes  # every tensor has this size
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    order = ["w3", "w2", "w1", "w0"]  # the source's order, not the manifest's
    with Subscriber(store) as sub, StreamedBase(sub, 1, order=order, ahead_bytes=one) as base:
        base.load("w3")
        assert base.ahead == ("w2",)  # one tensor's bytes ahead: the next one only
        wait_until(lambda: filled(base) == {"w3", "w2"})
        time.sleep(0.2)
        assert filled(base) == {"w3", "w2"}  # nothing past the bound was fetched
        base.drop("w3")
        base.load("w2")
        assert base.on_demand == 1 and base.ahead == ("w1",)
        assert base["w2"].tobytes() == v1["w2"].tobytes()
    with Subscriber(store) as sub, StreamedBase(sub, 1, ahead_bytes=2 * one) as base:
        base.load("w0")
        assert base.ahead == ("w1", "w2")
        for name in ("w1", "w2", "w3"):
            base.load(name)
            assert base[name].tobytes() == v1[name].tobytes()
        assert base.on_demand == 1  # only the first: every other one was fetched ahead
    with Subscriber(store) as sub, StreamedBase(sub, 1, ahead_bytes=one - 1) as base:
        base.load("w0")
        assert base.ahead == ()  # a tensor bigger than the bound is never fetched ahead
        base.load("w1")
        assert base.on_demand == 2 and base["w1"].tobytes() == v1["w1"].tobytes()


def test_a_tensor_asked_for_out_of_order_is_fetched_on_demand(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    v1 = published_base(tmp_path, s3_url, s3_endpoint, 6)
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    with Subscriber(store) as sub, StreamedBase(sub, 1, ahead_bytes=v1["w0"].nbytes) as base:
        base.load("w2")  # skips w0 and w1; fetches w3 ahead
        assert base.ahead == ("w3",)
        for name in ("w0", "w1", "w3"):
            base.load(name)
        assert base.on_demand == 3
        assert all(base[n].tobytes() == a.tobytes() for n, a in v1.items())
    assert filled(base) == set()  # closed: every tensor's memory given back


def test_a_damaged_tensor_fetched_ahead_fails_its_own_load_only(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    v1 = published_base(tmp_path, s3_url, s3_endpoint, 8)
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    damage(store, 1, "w2")
    with Subscriber(store) as sub, StreamedBase(sub, 1, ahead_bytes=2**20) as base:
        base.load("w0")
        assert "w2" in base.ahead  # fetched (and failed) ahead, not reported yet
        base.load("w1")
        assert base.failed is None and base["w1"].tobytes() == v1["w1"].tobytes()
        with pytest.raises(VerificationError):
            base.load("w2")
        assert base.failed is not None and "'w2'" in base.failed
    with Subscriber(store) as sub, StreamedBase(sub, 1, ahead_bytes=2**20) as base:
        base.load("w0")  # w2 fails ahead and is never asked for: nothing fails
        base.load("w1")
        assert base.failed is None


def test_tensors_fetched_ahead_together_take_fewer_requests(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    v1 = published_base(tmp_path, s3_url, s3_endpoint, 10)
    requests = {}
    with FaultProxy(s3_endpoint) as proxy:
        store = open_store(s3_url, endpoint_url=proxy.url)
        for ahead in (0, 4 * v1["w0"].nbytes):  # nothing ahead; then groups of two tensors
            with Subscriber(store) as sub, StreamedBase(sub, 1, ahead_bytes=ahead) as base:
                proxy.reset_counters()
                for name in v1:
                    base.load(name)
                    assert base[name].tobytes() == v1[name].tobytes()
                    base.drop(name)
                requests[ahead] = proxy.requests
    assert requests[0] == 4  # one ranged GET per tensor
    assert min(requests.values()) == 3  # w0 on demand, then (w1, w2) and (w3): one GET each
