"""Streaming fetch: tensors finish while others download, in a bounded window, all or nothing.

A store that holds back reads of one object (a gate) shows the order: the
other tensors are verified and decoded while it is held. Payload buffers are
counted by an instrumented allocator (what is alive at once, freed or not by
our own bookkeeping). Corruption and cancellation still leave nothing behind.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.errors import FetchCancelled, VerificationError
from wanrl_s3.fetch import stream
from wanrl_s3.fetch.files import local_snapshot, pull_to_file
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.io.safetensors_file import SafetensorsFile
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store
from wanrl_s3.store.memory import MemoryStore
from wanrl_s3.testing import Fault, FaultProxy, Rule, nudge_state

KiB = 2**10


def weights(n: int, elements: int, seed: int = 0) -> dict[str, np.ndarray]:
    """bf16 tensors with per-tensor scales: the byte-plane coding pays, so they are buffered."""
    rng = np.random.default_rng(seed)
    return {
        f"t{i}": (rng.standard_normal(elements, np.float32) * 0.02 * (i + 1)).astype(
            ml_dtypes.bfloat16
        )
        for i in range(n)
    }


class GatedStore(MemoryStore):
    """Reads of ``gated`` wait for ``gate`` (or ``limit_s``); counts reads in progress."""

    def __init__(self, name: str, gated: str, limit_s: float = 10.0) -> None:
        super().__init__(name)
        self.gated, self.limit_s = gated, limit_s
        self.gate, self.waiting = threading.Event(), threading.Event()
        self.active = 0
        self._lock = threading.Lock()

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        with self._lock:
            self.active += 1
        try:
            if key == self.gated:
                self.waiting.set()
                self.gate.wait(self.limit_s)
            return super()._read_into(key, offset, buf)
        finally:
            with self._lock:
                self.active -= 1


def publish(store: MemoryStore, state: dict[str, np.ndarray], version: int) -> None:
    config = PublishConfig(object_bytes=256 * KiB, part_bytes=5 * 2**20, delta="never")
    Publisher(store, config).publish(state, version)


def wait_until(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def gated_store(state: dict[str, np.ndarray]) -> GatedStore:
    """``state`` published; reads of t0's first object (no other tensor's bytes) gated."""
    name = uuid.uuid4().hex
    publish(MemoryStore(name), state, 1)
    with Subscriber(MemoryStore(name)) as sub:
        m = sub.manifest(1)
    first = m.by_name["t0"].segments[0].key
    assert all(first not in {s.key for s in e.segments} for e in m.tensors[1:])
    return GatedStore(name, m.payload_key(first))


def test_a_tensor_is_decoded_while_another_still_downloads() -> None:
    state = weights(3, 384 * KiB)
    store = gated_store(state)
    outputs: dict[str, np.ndarray] = {}

    def alloc(entry):  # type: ignore[no-untyped-def]
        outputs[entry.name] = np.zeros(entry.shape, ml_dtypes.bfloat16)
        return outputs[entry.name]

    result: list[object] = []
    with Subscriber(store, range_bytes=128 * KiB, window_bytes=4 * 2**20) as sub:
        worker = threading.Thread(target=lambda: result.append(sub.fetch(1, alloc=alloc)))
        worker.start()
        assert store.waiting.wait(10)
        # t0 is held back; t2 (coded, so written only by its decode) must finish meanwhile
        decoded_early = wait_until(
            lambda: "t2" in outputs and bool(np.array_equal(outputs["t2"], state["t2"])), 8
        )
        store.gate.set()
        worker.join(20)
    assert decoded_early, "t2 was not decoded until t0's last byte arrived"
    snap = result[0]
    assert all(np.array_equal(snap.tensors[n], a) for n, a in state.items())  # type: ignore[attr-defined]


def test_the_window_bounds_payload_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    live, peak, made = [0], [0], [0]
    lock = threading.Lock()

    def counted(nbytes: int) -> np.ndarray:
        buf = stream.scratch((nbytes,), np.uint8)
        with lock:
            live[0] += nbytes
            made[0] += nbytes
            peak[0] = max(peak[0], live[0])

        def freed() -> None:
            with lock:
                live[0] -= nbytes

        weakref.finalize(buf, freed)
        return buf

    monkeypatch.setattr(stream, "_buffer", counted)
    state = weights(10, 256 * KiB, seed=1)
    name = uuid.uuid4().hex
    publish(MemoryStore(name), state, 1)
    window = 600 * KiB
    with Subscriber(MemoryStore(name), range_bytes=256 * KiB, window_bytes=window) as sub:
        biggest = max(e.stored_bytes for e in sub.manifest(1).tensors)
        assert biggest < window and all(e.encoding == "planes" for e in sub.manifest(1).tensors)
        snap = sub.fetch(1)
    assert all(np.array_equal(snap.tensors[n], a) for n, a in state.items())
    assert made[0] > 3 * window  # the version's buffers would not fit in the window at once
    assert 0 < peak[0] <= window
    assert 0 < snap.peak_buffer_bytes <= window
    assert live[0] == 0  # every buffer freed once its tensor was done


def test_one_corrupt_tensor_fails_the_version_and_nothing_is_written(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    state = weights(6, 128 * KiB, seed=2)
    Publisher(store, PublishConfig(object_bytes=256 * KiB)).publish(state, 1)
    with Subscriber(store, range_bytes=64 * KiB, window_bytes=256 * KiB) as sub:
        m = sub.manifest(1)
        seg = m.by_name["t4"].segments[-1]
        key = m.payload_key(seg.key)
        data = bytearray(store.get_bytes(key))
        data[seg.offset + seg.length - 1] ^= 0x40
        store.put_bytes(key, bytes(data))
        out = tmp_path / "model.safetensors"
        with pytest.raises(VerificationError, match="t4"):
            pull_to_file(sub, out, 1)
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file


@pytest.mark.parametrize("kind", ["delta", "full"])
def test_a_tensor_damaged_on_the_way_is_read_once_more(
    s3_url: str, s3_endpoint: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A byte flipped in one response fails the tensor's check; a second read serves it."""
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    v1 = weights(4, 64 * KiB, seed=3)
    v2 = nudge_state(v1, 0.01, seed=4)
    publisher = Publisher(store, PublishConfig(delta="always", object_bytes=128 * KiB))
    publisher.publish(v1, 1)
    publisher.publish(v2, 2)
    rule = Rule(Fault.FLIP_RESPONSE, method="GET", key=r"/v/0+2/.*\.bin$", count=1)
    if kind == "full":
        rule = Rule(Fault.FLIP_RESPONSE, method="GET", key=r"/v/0+1/.*\.bin$", count=1)
    with FaultProxy(s3_endpoint, rules=[rule]) as proxy:
        via = open_store(s3_url, endpoint_url=proxy.url)
        with Subscriber(via) as sub, caplog.at_level("INFO", logger=stream.__name__):
            got = sub.fetch(2) if kind == "delta" else sub.fetch(1)
        assert proxy.counts[Fault.FLIP_RESPONSE] == 1
    want = v2 if kind == "delta" else v1
    assert all(got.tensors[k].tobytes() == want[k].tobytes() for k in want)
    assert [r for r in caplog.records if "once more" in r.message]


def test_a_manifest_damaged_on_the_way_is_read_once_more(s3_url: str, s3_endpoint: str) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    state = weights(2, 16 * KiB, seed=5)
    Publisher(store).publish(state, 1)
    rule = Rule(Fault.FLIP_RESPONSE, method="GET", key=r"/manifest\.json$", count=1)
    with FaultProxy(s3_endpoint, rules=[rule]) as proxy:
        with Subscriber(open_store(s3_url, endpoint_url=proxy.url)) as sub:
            got = sub.fetch(1)
        assert proxy.counts[Fault.FLIP_RESPONSE] == 1
    assert got.tensors["t1"].tobytes() == state["t1"].tobytes()
    rule = Rule(Fault.FLIP_RESPONSE, method="GET", key=r"/manifest\.json$", count=2)
    with (
        FaultProxy(s3_endpoint, rules=[rule]) as proxy,  # damaged every time: refused
        Subscriber(open_store(s3_url, endpoint_url=proxy.url)) as sub,
        pytest.raises(VerificationError),
    ):
        sub.fetch(1)


def test_cancel_mid_stream_stops_every_request_and_returns_nothing() -> None:
    state = weights(4, 256 * KiB, seed=3)
    store = gated_store(state)
    cancel = threading.Event()
    errors: list[BaseException] = []
    with Subscriber(store, range_bytes=64 * KiB) as sub:

        def run() -> None:
            try:
                sub.fetch(1, cancel=cancel)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert store.waiting.wait(10)
        cancel.set()
        time.sleep(0.2)
        assert worker.is_alive()  # the held request is still in flight: fetch waits for it
        store.gate.set()
        worker.join(20)
        assert not worker.is_alive()
        assert store.active == 0  # no request outlived the call
    assert len(errors) == 1 and isinstance(errors[0], FetchCancelled)


def test_pull_have_applies_deltas_file_to_file_bit_exact(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    v1 = weights(5, 200 * KiB, seed=4)
    v2 = nudge_state(v1, 0.01, seed=5)
    v3 = nudge_state(v2, 0.01, seed=6)
    pub = Publisher(store, PublishConfig(object_bytes=256 * KiB))
    for version, state in enumerate((v1, v2, v3), start=1):
        pub.publish(state, version)
    with Subscriber(store, window_bytes=128 * KiB) as sub:
        pull_to_file(sub, tmp_path / "v1.safetensors", 1)
        have = local_snapshot(tmp_path / "v1.safetensors", sub)
        snap = pull_to_file(sub, tmp_path / "v3.safetensors", 3, have=have)
        assert snap.path == (2, 3)  # deltas only, applied to the old file's tensors
        assert snap.downloaded_bytes < sub.plan(3).download_bytes / 10
    got = SafetensorsFile(tmp_path / "v3.safetensors")
    assert set(got.specs) == set(v3)
    for name, arr in v3.items():
        assert got.array(name).tobytes() == arr.tobytes()
    old = SafetensorsFile(tmp_path / "v1.safetensors")  # the base file is untouched
    assert all(old.array(n).tobytes() == a.tobytes() for n, a in v1.items())


class _Refusing(Executor):
    """A pool shut down under a fetch: ``cancelled`` cancels what it is given (as
    ``shutdown(cancel_futures=True)`` does to queued work), else it refuses to take it."""

    def __init__(self, cancelled: bool) -> None:
        self.cancelled = cancelled

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        if not self.cancelled:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: Future[None] = Future()
        future.cancel()
        return future


@pytest.mark.parametrize("cancelled", [True, False])
def test_a_fetch_whose_pool_was_shut_down_fails_instead_of_waiting_forever(
    cancelled: bool,
) -> None:
    """A closed Subscriber's pools drop the fetch's requests; the coordinator counted them
    in flight and waited forever (a publisher's fetch-ahead thread then held the exit)."""
    store = open_store(f"memory://{uuid.uuid4().hex}")
    Publisher(store).publish(weights(2, 4096), 1)
    outcome: list[BaseException | None] = []
    with Subscriber(store) as sub:
        pool, sub._pool = sub._pool, _Refusing(cancelled)  # type: ignore[assignment]

        def fetch() -> None:
            try:
                sub.fetch(1)
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=fetch, daemon=True)
        waiter.start()
        waiter.join(10)
        sub._pool = pool
    assert not waiter.is_alive(), "the fetch still waits for requests that will never run"
    assert isinstance(outcome[0], FetchCancelled) and "shut down" in str(outcome[0])
