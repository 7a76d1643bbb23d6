"""Watcher: conditional polling, background prefetch, short installs, abandoning superseded."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fetch.watch import WatchConfig, Watcher
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store

MiB = 2**20


def model(seed: int, mib: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = mib * MiB // 2 // 4
    return {
        f"layers.{i}.w": rng.integers(0, 2**16, n, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(4)
    }


def wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_unchanged_latest_is_a_304_and_install_returns_at_once(tmp_path) -> None:
    store = open_store(f"file://{tmp_path}/s")
    Publisher(store, PublishConfig(delta="never")).publish(model(1), 1)
    with Subscriber(store) as sub:
        w = Watcher(sub)
        assert w.poll_once().version == 1
        assert w.poll_once() is None  # conditional GET: nothing new, no body
        assert w.install() is None  # nothing ready yet (no download thread running)
        assert w.fetch_once()
        result = w.install()
        assert result is not None and result.version == 1 and w.installed_version == 1
        start = time.monotonic()
        assert w.install() is None
        assert time.monotonic() - start < 0.05


def test_prefetch_in_background_then_install(s3_url: str, s3_endpoint: str) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig(keyframe_every=100))
    state = model(2)
    pub.publish(state, 1)
    with Subscriber(store) as sub, Watcher(sub, WatchConfig(poll_interval_s=0.05)) as w:
        assert w.wait_ready(30) == 1
        installed: dict[str, np.ndarray] = {}
        r = w.install(lambda name, arr: installed.__setitem__(name, arr.copy()))
        assert r.version == 1 and r.path == (1,)
        assert all(installed[k].tobytes() == state[k].tobytes() for k in state)
        bits = state["layers.0.w"].view(np.uint16).copy()
        bits[::100] ^= 1
        state = {**state, "layers.0.w": bits.view(ml_dtypes.bfloat16)}
        pub.publish(state, 2)
        assert w.wait_ready(30) == 2
        r2 = w.install(lambda name, arr: installed.__setitem__(name, arr.copy()))
        assert r2.path == (2,) and r2.downloaded_bytes < 0.05 * sum(
            a.nbytes for a in state.values()
        )
        assert r2.seen_at_s >= r2.published_at_s - 1 and r2.installed_at_s >= r2.ready_at_s
        assert all(installed[k].tobytes() == state[k].tobytes() for k in state)


def test_generation_continues_while_a_big_version_downloads(s3_url: str, s3_endpoint: str) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig(delta="never"))
    pub.publish(model(3, mib=1), 1)
    produced: list[tuple[float, int | None]] = []
    stop = threading.Event()
    with (
        Subscriber(store, concurrency=2) as sub,
        Watcher(sub, WatchConfig(poll_interval_s=0.05)) as w,
    ):
        w.wait_ready(30)
        w.install()

        def engine() -> None:  # keeps generating, tagging items with the policy it runs
            while not stop.is_set():
                produced.append((time.monotonic(), w.installed_version))
                time.sleep(0.001)

        t = threading.Thread(target=engine)
        t.start()
        pub.publish(model(4, mib=64), 2)  # a big, full version
        commit = time.monotonic()
        assert w.wait_ready(60) == 2
        ready = time.monotonic()
        r = w.install()
        switched = time.monotonic()
        time.sleep(0.05)
        stop.set()
        t.join()
    during = [v for ts, v in produced if commit <= ts < ready]
    after = [v for ts, v in produced if ts > switched]
    assert len(during) > 10, "the engine stalled while the version downloaded"
    assert set(during) == {1} and set(after) == {2}
    assert r.apply_s < (ready - commit)  # the pause is the local apply, not the download


def test_superseded_version_is_abandoned(tmp_path) -> None:
    store = open_store(f"file://{tmp_path}/s")
    pub = Publisher(store, PublishConfig(delta="never"))
    pub.publish(model(5), 1)
    pub.publish(model(6), 2)
    with Subscriber(store) as sub:
        w = Watcher(sub)
        w.poll_once()
        w._state.downloading = 1  # as if v1 were still downloading when v2 appears
        w._state.want = 1
        w._poller.forget_etag()
        assert not w._prefetch.cancel.is_set()
        assert w.poll_once().version == 2
        assert w._prefetch.cancel.is_set()  # full v1 then full v2 costs more than full v2
        w._state.downloading = None
        assert w.fetch_once()
        assert w.install().version == 2


def test_never_exposes_an_unverified_version(tmp_path) -> None:
    store = open_store(f"file://{tmp_path}/s")
    Publisher(store, PublishConfig(delta="never")).publish(model(7), 1)
    key = next(o.key for o in store.list("v/") if o.key.endswith(".bin"))
    data = bytearray(store.get_bytes(key))
    data[0] ^= 1
    store.put_bytes(key, bytes(data))
    with Subscriber(store) as sub:
        w = Watcher(sub, WatchConfig(retry_backoff_s=0.01))
        w.poll_once()
        assert not w.fetch_once()
        assert w.ready_version is None and w.install() is None
        assert "does not match" in (w.last_error or "") or "not match" in (w.last_error or "")


@pytest.mark.parametrize("bad", [{"poll_interval_s": 0}, {"jitter_fraction": 1.5}])
def test_config_is_validated(bad: dict) -> None:
    from wanrl_s3.errors import UsageError

    with pytest.raises(UsageError):
        WatchConfig(**bad)


@contextlib.contextmanager
def v1_ready(tmp_path) -> Iterator[Watcher]:
    """A watcher (threads not started) with version 1 downloaded and ready to install."""
    store = open_store(f"file://{tmp_path}/s")
    Publisher(store, PublishConfig(delta="never")).publish(model(1), 1)
    with Subscriber(store) as sub:
        w = Watcher(sub)
        w.poll_once()
        assert w.fetch_once() and w.ready_version == 1
        yield w


def test_a_version_being_installed_is_held_not_downloaded_again(tmp_path) -> None:
    """The download loop re-checks right after a fetch; an install in progress counts as held."""
    with v1_ready(tmp_path) as w:
        during: list[object] = []

        def apply(name: str, arr: np.ndarray) -> None:
            during.append((w.fetch_once(), w.held_version))

        assert w.install(apply) is not None
        assert during and all(d == (False, 1) for d in during)


def test_a_failed_install_offers_the_version_again(tmp_path) -> None:
    with v1_ready(tmp_path) as w:

        def broken(name: str, arr: np.ndarray) -> None:
            raise RuntimeError("the engine refused the weights")

        with pytest.raises(RuntimeError):
            w.install(broken)
        assert w.installed_version is None and w.ready_version == 1
        assert w.install() is not None and w.installed_version == 1


# -- reuse_installed: one snapshot in memory, not two -----------------------------------
def nudged(state: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """``state`` with 1% of one tensor's elements flipped in their lowest bit."""
    bits = state["layers.0.w"].view(np.uint16).copy()
    bits[seed::100] ^= 1
    return {**state, "layers.0.w": bits.view(ml_dtypes.bfloat16)}


def take(w: Watcher, done: bool = True) -> tuple[tuple[int, ...], dict[str, np.ndarray]]:
    """Install the ready version as an engine does (the snapshot's arrays, no copies), and
    with ``done`` say it has copied them out: the versions it was read from, the arrays."""
    taken: list = []
    result = w.install(sink=taken.append)
    assert result is not None
    if done:
        w.done_with(taken[0])
    return result.path, dict(taken[0].tensors)


@contextlib.contextmanager
def v1_installed(
    tmp_path, seed: int, config: WatchConfig | None = None
) -> Iterator[tuple[Watcher, Publisher, dict[str, np.ndarray]]]:
    """A watcher (threads not started) that has installed version 1, the engine's way;
    its publisher, and v1's arrays as installed."""
    store = open_store(f"file://{tmp_path}/s")
    pub = Publisher(store, PublishConfig(keyframe_every=100))
    pub.publish(model(seed), 1)
    with Subscriber(store) as sub:
        w = Watcher(sub, config)
        w.poll_once()
        assert w.fetch_once()
        yield w, pub, take(w)[1]


def published(w: Watcher, pub: Publisher, state: dict[str, np.ndarray], version: int) -> bool:
    """Publish ``state`` as ``version``; whether the watcher then fetches it."""
    pub.publish(state, version)
    w.poll_once()
    return w.fetch_once()


def test_reuse_installed_decodes_the_next_version_into_the_installed_arrays(tmp_path) -> None:
    state = model(11)
    with v1_installed(tmp_path, 11, WatchConfig(reuse_installed=True)) as (w, pub, v1):
        for version in (2, 3):
            state = nudged(state, version)
            assert published(w, pub, state, version)
            _, arrays = take(w)
            assert all(arrays[k] is v1[k] for k in state)  # the same memory, decoded in place
            assert all(arrays[k].tobytes() == state[k].tobytes() for k in state)
            assert w.installed_version == version


def test_reuse_installed_waits_for_the_caller_to_be_done_with_the_arrays(tmp_path) -> None:
    """An engine still copying the installed tensors out must never see them change: until
    done_with, the next version gets new arrays."""
    second = nudged(model(14), 2)
    with v1_installed(tmp_path, 14, WatchConfig(reuse_installed=True)) as (w, pub, v1):
        assert published(w, pub, second, 2)  # v1 is done with (v1_installed)
        _, v2 = take(w, done=False)  # installed, still being copied
        third = nudged(second, 3)
        assert published(w, pub, third, 3)
        _, v3 = take(w)
        assert all(v2[k] is v1[k] and v3[k] is not v2[k] for k in third)
        assert all(v2[k].tobytes() == second[k].tobytes() for k in third)  # untouched
        assert all(v3[k].tobytes() == third[k].tobytes() for k in third)


def test_without_reuse_installed_the_installed_arrays_stay_as_they_were(tmp_path) -> None:
    first = model(12)
    with v1_installed(tmp_path, 12) as (w, pub, v1):
        assert published(w, pub, nudged(first, 2), 2)
        _, v2 = take(w)
        assert all(v2[k] is not v1[k] for k in first)
        assert all(v1[k].tobytes() == first[k].tobytes() for k in first)


def test_reuse_installed_after_a_failed_download_starts_over_from_the_keyframe(tmp_path) -> None:
    """A download that fails may have written some of the installed arrays already: the
    next attempt does not decode onto them but starts from the keyframe."""
    config = WatchConfig(reuse_installed=True, retry_backoff_s=0.01)
    with v1_installed(tmp_path, 13, config) as (w, pub, _):
        bits = {k: v.view(np.uint16).copy() for k, v in model(13).items()}
        for b in bits.values():  # every tensor changes: one delta each, in one object
            b[::97] ^= 1
        state = {k: b.view(ml_dtypes.bfloat16) for k, b in bits.items()}
        store = pub.store
        pub.publish(state, 2)
        key = next(o.key for o in store.list("v/000000000002/") if o.key.endswith(".bin"))
        good = store.get_bytes(key)
        store.put_bytes(key, good[:-1] + bytes([good[-1] ^ 1]))  # the last tensor's delta
        w.poll_once()
        assert not w.fetch_once()
        assert w.installed_version == 1 and w.ready_version is None and w.last_error
        store.put_bytes(key, good)  # repaired
        assert w.fetch_once()
        path, arrays = take(w)
        assert w.installed_version == 2 and path == (1, 2)  # the keyframe again: no base
        assert all(arrays[k].tobytes() == state[k].tobytes() for k in state)


def test_reuse_installed_is_for_memory_only(tmp_path) -> None:
    from wanrl_s3.errors import UsageError

    with pytest.raises(UsageError, match="host_cache_dir"):
        WatchConfig(reuse_installed=True, host_cache_dir=str(tmp_path))


def test_share_dir_is_the_old_name_of_host_cache_dir(tmp_path, monkeypatch) -> None:
    """Configs written for ``share_dir`` keep working, with one DeprecationWarning."""
    from dataclasses import replace

    from wanrl_s3 import _exports

    monkeypatch.setattr(_exports, "_warned", set())
    with pytest.warns(DeprecationWarning, match=r"WatchConfig\(share_dir=\) is deprecated"):
        config = WatchConfig(share_dir=str(tmp_path))
    assert config.host_cache_dir == str(tmp_path) == replace(config).host_cache_dir
    with pytest.warns(DeprecationWarning, match=r"WatchConfig\.share_dir is deprecated"):
        assert config.share_dir == str(tmp_path)
    with pytest.raises(TypeError, match="give host_cache_dir alone"):
        WatchConfig(share_dir="a", host_cache_dir="b")
