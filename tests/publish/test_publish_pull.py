"""Full-snapshot publish and pull through every store, bit for bit, for every dtype."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import UsageError, VerificationError, VersionConflictError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.format.latest import Latest
from wanrl_s3.format.manifest import Manifest
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore

MiB = 2**20


def every_dtype(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each supported dtype, plus 0-d, empty and non-contiguous tensors."""
    bits = rng.integers(0, 2**16, size=(33, 7), dtype=np.uint16)
    return {
        "bf16": bits.view(ml_dtypes.bfloat16),
        "f16": bits.view(np.float16),
        "f32": rng.standard_normal((5, 3, 2)).astype(np.float32),
        "f64": np.array([np.nan, -0.0, np.inf, 1e-310]),
        "i8": rng.integers(-128, 127, size=17, dtype=np.int8),
        "i16": rng.integers(-(2**15), 2**15, size=(4, 4), dtype=np.int16),
        "i32": rng.integers(-(2**31), 2**31, size=9, dtype=np.int32),
        "i64": rng.integers(-(2**63), 2**63 - 1, size=3, dtype=np.int64),
        "u8": rng.integers(0, 255, size=100, dtype=np.uint8),
        "bool": rng.random(13) > 0.5,
        "scalar": np.float32(3.5) * np.ones((), np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "strided": rng.standard_normal((6, 8)).astype(np.float32)[:, ::2],
        "transposed": rng.standard_normal((4, 5)).astype(np.float32).T,
    }


def assert_bit_identical(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name, arr in want.items():
        g = got[name]
        assert g.dtype == arr.dtype and g.shape == arr.shape, name
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(arr).tobytes(), name


def test_round_trip_every_dtype(store: ObjectStore) -> None:
    tensors = every_dtype(np.random.default_rng(0))
    result = Publisher(store, PublishConfig(delta="never")).publish(tensors, 1)
    assert result.kind == "full" and result.latest_moved and result.tensors == len(tensors)
    with Subscriber(store) as sub:
        snap = sub.fetch()
    assert snap.version == 1
    assert_bit_identical(dict(snap.tensors), tensors)


def test_tensor_larger_than_one_object(store: ObjectStore) -> None:
    """object_bytes below a tensor's size makes it span several payload objects."""
    rng = np.random.default_rng(1)
    tensors = {
        "big": rng.standard_normal(3000).astype(np.float32),
        "small": np.arange(10, dtype=np.int64),
    }
    cfg = PublishConfig(delta="never", object_bytes=1000, full_coding="raw")  # sizes known
    Publisher(store, cfg).publish(tensors, 5)
    with Subscriber(store, range_bytes=333) as sub:
        m = sub.manifest(5)
        assert len(m.by_name["big"].segments) >= 12 and len(m.objects) >= 12
        assert_bit_identical(dict(sub.fetch(5).tensors), tensors)


def test_keyframes_are_coded_in_byte_planes_and_pull_bit_exact(store: ObjectStore) -> None:
    """Trained-like bf16 weights (per-tensor scales) store at about 0.67x; random bytes raw."""
    rng = np.random.default_rng(3)
    tensors = {
        f"w{i}": (rng.standard_normal(64 * 1024) * scale).astype(ml_dtypes.bfloat16)
        for i, scale in enumerate((0.002, 0.02, 0.2, 1.0))
    }
    tensors["noise"] = rng.integers(0, 2**16, 64 * 1024, dtype=np.uint16).view(ml_dtypes.bfloat16)
    result = Publisher(store, PublishConfig(delta="never")).publish(tensors, 1)
    with Subscriber(store) as sub:
        m = sub.manifest(1)
        assert {e.name: e.encoding for e in m.tensors} == {
            **{f"w{i}": "planes" for i in range(4)},
            "noise": "raw",
        }
        coded = sum(m.by_name[f"w{i}"].stored_bytes for i in range(4))
        assert coded < 0.75 * sum(tensors[f"w{i}"].nbytes for i in range(4))
        assert result.stored_bytes < result.raw_bytes
        assert_bit_identical(dict(sub.fetch(1).tensors), tensors)
    raw = Publisher(store, PublishConfig(delta="never", full_coding="raw")).publish(tensors, 2)
    assert raw.stored_bytes == raw.raw_bytes


def test_a_flipped_byte_in_a_coded_tensor_never_installs(store: ObjectStore) -> None:
    rng = np.random.default_rng(4)
    tensors = {"w": (rng.standard_normal(64 * 1024) * 0.02).astype(ml_dtypes.bfloat16)}
    Publisher(store, PublishConfig(delta="never")).publish(tensors, 1)
    m = Manifest.from_json(store.get_bytes(layout.manifest_key(1)))
    seg = m.by_name["w"].segments[0]
    key = m.payload_key(seg.key)
    data = bytearray(store.get_bytes(key))
    data[seg.offset + seg.length // 2] ^= 0x10
    store.put_bytes(key, bytes(data))
    with Subscriber(store) as sub, pytest.raises(VerificationError, match="do not match"):
        sub.fetch(1)


def test_multipart_payload_and_parallel_ranges(store: ObjectStore) -> None:
    rng = np.random.default_rng(2)
    tensors = {
        f"layer.{i}": rng.integers(0, 2**16, size=3 * MiB // 2, dtype=np.uint16).view(
            ml_dtypes.bfloat16
        )
        for i in range(8)
    }  # 24 MiB in 5 MiB parts
    cfg = PublishConfig(delta="never", part_bytes=5 * MiB, object_bytes=16 * MiB)
    Publisher(store, cfg).publish(tensors, 1)
    with Subscriber(store, range_bytes=MiB) as sub:
        assert_bit_identical(dict(sub.fetch().tensors), tensors)


def test_second_publish_of_a_version_is_refused_and_first_untouched(store: ObjectStore) -> None:
    first = {"w": np.arange(10, dtype=np.float32)}
    Publisher(store, PublishConfig(delta="never")).publish(first, 3)
    before = store.get_bytes(layout.manifest_key(3))
    with pytest.raises(VersionConflictError, match="not newer than the newest version"):
        Publisher(store).publish({"w": np.zeros(10, np.float32)}, 3)
    with pytest.raises(VersionConflictError):
        Publisher(store).publish({"w": np.zeros(10, np.float32)}, 2)
    assert store.get_bytes(layout.manifest_key(3)) == before
    with Subscriber(store) as sub:
        assert_bit_identical(dict(sub.fetch(3).tensors), first)


def test_racing_publisher_loses_at_the_manifest(store: ObjectStore) -> None:
    """Both pass the early checks; the conditional create lets exactly one win."""
    a, b = Publisher(store, PublishConfig(delta="never")), Publisher(store)
    b._writer._check_claimable = lambda version: None  # type: ignore[method-assign]  # lost the race
    a.publish({"w": np.ones(4, np.float32)}, 7)
    with pytest.raises(VersionConflictError, match="claimed by another publisher"):
        b.publish({"w": np.zeros(4, np.float32)}, 7)
    with Subscriber(store) as sub:
        assert sub.fetch(7).tensors["w"].tolist() == [1, 1, 1, 1]
    payload = [o.key for o in store.list("v/") if not o.key.endswith("manifest.json")]
    assert len({k.split("/")[2] for k in payload}) == 1  # the loser's payload was removed


def test_latest_never_moves_backwards(store: ObjectStore) -> None:
    pub = Publisher(store, PublishConfig(delta="never"))
    pub.publish({"w": np.ones(2, np.float32)}, 4)
    # A slower publisher of an older version that already claimed its manifest:
    late = Publisher(store, PublishConfig(delta="never"))
    late._writer._check_claimable = lambda version: None  # type: ignore[method-assign]
    result = late.publish({"w": np.zeros(2, np.float32)}, 2)
    assert not result.latest_moved
    assert Latest.from_json(store.get_bytes(layout.LATEST_KEY)).version == 4


def test_publish_crash_before_manifest_leaves_previous_version_served(store: ObjectStore) -> None:
    pub = Publisher(store, PublishConfig(delta="never"))
    pub.publish({"w": np.ones(4, np.float32)}, 1)

    def exploding():
        yield "w", np.full(4, 2, np.float32)
        raise RuntimeError("trainer died mid-publish")

    with pytest.raises(RuntimeError):
        pub.publish(exploding(), 2)
    assert not store.exists(layout.manifest_key(2))
    with Subscriber(store) as sub:
        assert sub.latest().version == 1
        assert sub.fetch().tensors["w"].tolist() == [1, 1, 1, 1]


def test_empty_state_dict_is_refused(store: ObjectStore) -> None:
    with pytest.raises(UsageError, match="nothing to publish"):
        Publisher(store).publish({}, 1)
    assert not store.exists(layout.LATEST_KEY)


def test_torch_tensors_round_trip(store: ObjectStore) -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    tensors = {
        "bf16": torch.randn(16, 8, generator=g).to(torch.bfloat16),
        "f32_view": torch.randn(8, 8, generator=g).t(),
        "bool": torch.rand(5, generator=g) > 0.5,
    }
    Publisher(store, PublishConfig(delta="never")).publish(tensors, 1)
    with Subscriber(store) as sub:
        got = sub.fetch().to_torch()
    for name, t in tensors.items():
        assert got[name].dtype == t.dtype and torch.equal(got[name], t.contiguous()), name
