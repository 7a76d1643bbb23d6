"""A watcher whose LATEST turns hostile, or whose threads meet an unexpected error, keeps going.

Over real HTTP to SeaweedFS: a deeply nested LATEST, a LATEST that names a far-future
version that does not exist, and an exception nobody planned for in the poll or
the download. Each must show in ``last_error`` (what the worker writes into its
status object) and must not stop the watcher from installing the next real
version once the store is repaired.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator

import pytest

from tests.regions.support import SMALL, model, nudge, same
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fetch.watch import WatchConfig, Watcher
from wanrl_s3.format import layout
from wanrl_s3.format.signing import Signer, Verifier, generate_keypair
from wanrl_s3.publish.publisher import Publisher
from wanrl_s3.store import ObjectStore, open_store

FAST = WatchConfig(
    poll_interval_s=0.05,
    visible_backoff_s=0.01,
    retry_backoff_s=0.05,
    max_backoff_s=0.2,
    invisible_grace_s=0.5,
)
FAR_FUTURE = layout.MAX_VERSION  # v999999999999: a version nobody will publish


@pytest.fixture
def store(s3_url: str, s3_endpoint: str) -> ObjectStore:
    return open_store(s3_url, endpoint_url=s3_endpoint)


@pytest.fixture
def watching(store: ObjectStore) -> Iterator[Watcher]:
    with Subscriber(store) as sub, Watcher(sub, FAST) as w:
        yield w


def install_until(w: Watcher, version: int, timeout_s: float = 30.0) -> None:
    """Install whatever becomes ready until ``version`` is installed (or fail)."""
    deadline = time.monotonic() + timeout_s
    while w.installed_version != version:
        assert time.monotonic() < deadline, (w.installed_version, w.last_error)
        if w.wait_ready(0.05) is not None:
            w.install()


def wait_for(predicate: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [30_000, 100_000])  # past the parser's limit; past 64 KiB
def test_a_deeply_nested_latest_is_an_error_and_the_next_version_installs(
    store: ObjectStore, watching: Watcher, depth: int
) -> None:
    pub = Publisher(store, SMALL)
    state = model(1)
    pub.publish(state, 1)
    install_until(watching, 1)
    store.put_bytes(layout.LATEST_KEY, nested(depth))
    wait_for(lambda: "LATEST" in (watching.last_error or ""))
    failure = watching.failure
    assert failure is not None and failure.what == "poll"
    # too deep for the parser; or over 64 KiB, refused by the bounded read itself
    assert "nests deeper" in failure.message or "larger than 64 KiB" in failure.message
    time.sleep(1.0)  # several failed polls, backing off
    assert watching.alive
    state = nudge(state, 2)
    pub.publish(state, 2)  # the publisher overwrites the corrupt pointer
    install_until(watching, 2)
    assert same(watching._state.installed.tensors, state)  # type: ignore[union-attr]
    wait_for(lambda: watching.last_error is None)  # the next good poll clears it


def _raise_once(monkeypatch: pytest.MonkeyPatch, name: str, error: Exception) -> Callable[[], int]:
    """Make ``Subscriber.<name>`` raise ``error`` on its first call only; returns a call count.

    The one monkeypatch here: an unexpected exception cannot be provoked through
    the store, since every failure the store can produce is a WanrlError.
    """
    real = getattr(Subscriber, name)
    calls = [0]

    def flaky(self: Subscriber, *args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == 1:
            raise error
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Subscriber, name, flaky)
    return lambda: calls[0]


@pytest.mark.parametrize(("name", "what"), [("poll_latest", "poll"), ("fetch", "download")])
def test_an_unexpected_exception_is_seen_and_the_thread_recovers(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch, name: str, what: str
) -> None:
    pub = Publisher(store, SMALL)
    state = model(2)
    pub.publish(state, 1)
    calls = _raise_once(monkeypatch, name, RuntimeError("injected fault"))
    with Subscriber(store) as sub, Watcher(sub, FAST) as w:
        wait_for(lambda: calls() >= 1)
        wait_for(lambda: w.failure is not None or w.ready_version is not None)
        seen = w.failure  # recorded before the retry could succeed and clear it
        install_until(w, 1)
        assert calls() >= 2 and w.alive  # it tried again: the thread did not die
        state = nudge(state, 2)
        pub.publish(state, 2)
        install_until(w, 2)
    assert seen is not None and seen.what == what
    assert "RuntimeError: injected fault" in seen.message
    assert same(w._state.installed.tensors, state)  # type: ignore[union-attr]


def test_a_pointer_to_a_version_that_never_appears_does_not_block_later_ones(
    store: ObjectStore, watching: Watcher
) -> None:
    pub = Publisher(store, SMALL)
    state = model(3)
    pub.publish(state, 1)
    state = nudge(state, 2)
    pub.publish(state, 2)
    install_until(watching, 2)
    good = store.get_bytes(layout.LATEST_KEY)
    bogus = json.loads(good)
    bogus.update(version=FAR_FUTURE, manifest=layout.manifest_key(FAR_FUTURE))
    store.put_bytes(layout.LATEST_KEY, json.dumps(bogus).encode())
    # past the grace period, the pointer nobody can follow is an error, naming the version
    wait_for(lambda: f"v{FAR_FUTURE}" in (watching.last_error or ""))
    failure = watching.failure
    assert failure is not None and failure.what == "visibility"
    assert "grace" in failure.message
    store.put_bytes(layout.LATEST_KEY, good)  # restored
    state = nudge(state, 3)
    pub.publish(state, 3)
    install_until(watching, 3)
    assert same(watching._state.installed.tensors, state)  # type: ignore[union-attr]
    assert watching.last_error is None


def test_a_version_within_the_grace_period_is_not_an_error(store: ObjectStore) -> None:
    """Replication lag shorter than the grace period is waited for silently, as before."""
    pub = Publisher(store, SMALL)
    pub.publish(model(4), 1)
    good = json.loads(store.get_bytes(layout.LATEST_KEY))
    good.update(version=7, manifest=layout.manifest_key(7))
    store.put_bytes(layout.LATEST_KEY, json.dumps(good).encode())  # v7 "still replicating"
    slow = WatchConfig(poll_interval_s=0.05, visible_backoff_s=0.01, invisible_grace_s=60)
    with Subscriber(store) as sub, Watcher(sub, slow) as w:
        wait_for(lambda: w._state.want == 7)
        time.sleep(0.5)
        assert w.last_error is None and w.alive


def test_an_expired_latest_of_the_version_held_is_seen_and_clears_on_the_next(
    store: ObjectStore,
) -> None:
    """The publisher stopped (or an old pointer is replayed) while the watcher already holds
    the version it names: each poll is a 304, and the pointer must still be found expired."""
    private, public = generate_keypair()
    expiring = dataclasses.replace(SMALL, latest_expiry_s=2.5)
    pub = Publisher(store, expiring, signer=Signer(private))
    state = model(5)
    pub.publish(state, 1)
    with Subscriber(store, verifier=Verifier([public])) as sub, Watcher(sub, FAST) as w:
        install_until(w, 1)
        wait_for(lambda: "expired" in (w.last_error or ""))
        failure = w.failure
        assert failure is not None and failure.what == "poll" and "LATEST (v1)" in failure.message
        assert w.installed_version == 1 and w.alive  # it keeps the version it has
        state = nudge(state, 6)
        pub.publish(state, 2)  # a fresh signed pointer
        install_until(w, 2)
        wait_for(lambda: w.last_error is None)
