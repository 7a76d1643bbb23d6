"""The trainer core: ``submit(weights, version)`` returns a future while the version publishes.

Publications that must be held open go through :class:`Gated`, a real Publisher
whose ``publish`` waits for the test's go: what runs when is decided by events,
never by timing. S3 behaviour (a missing bucket, one deleted mid-run) is a real
SeaweedFS server over HTTP; the rest uses the in-memory store.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import uuid
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

from tests.trainer.support import ROOT, delete_bucket
from tests.trainer.weights import as_published, digests, gen, model, step
from wanrl_s3 import (
    Publication,
    Publisher,
    ShardedPublisher,
    Subscriber,
    TrainerPublisher,
    VersionPublisher,
)
from wanrl_s3.errors import PublicationFailedError, StoreError, UsageError, WanrlError
from wanrl_s3.format import layout
from wanrl_s3.format.signing import Signer, Verifier, generate_keypair
from wanrl_s3.store import FakeClock, ObjectStore, open_store

BAD = {"x" * 2000: np.zeros(2, np.float32)}  # a name no manifest may hold: fatal, not an outage


def memory() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}")


def expected(weights: dict[str, torch.Tensor]) -> dict[str, str]:
    return digests(as_published(weights))


def pulled(store: ObjectStore, version: int) -> dict[str, str]:
    with Subscriber(store) as sub:
        return digests(sub.fetch(version).to_torch())


class Gated(Publisher):
    """A Publisher whose publications start, then wait for the test's go."""

    def __init__(self, *args: Any, clock: FakeClock | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = threading.Semaphore(0)
        self.go = threading.Semaphore(0)
        self.clock = clock

    def publish(self, tensors: Any, version: int, **kwargs: Any) -> Any:
        self.started.release()
        if not self.go.acquire(timeout=60):
            raise TimeoutError("the test never let the publication go")
        if self.clock is not None:
            self.clock.sleep(7.5)  # the publication takes 7.5 s of fake time
        return super().publish(tensors, version, **kwargs)


class Dying(Publisher):
    """A publication thread that dies of a bug."""

    def publish(self, tensors: Any, version: int, **kwargs: Any) -> Any:
        raise RuntimeError("the publication thread died")


def test_both_publishers_are_version_publishers_and_nothing_else_is_taken() -> None:
    store = memory()
    assert isinstance(Publisher(store), VersionPublisher)
    assert isinstance(ShardedPublisher(store, rank=0, ranks=2, run_id="r"), VersionPublisher)
    with pytest.raises(UsageError, match="needs a Publisher or a ShardedPublisher"):
        TrainerPublisher(store)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="close_wait_s"):
        TrainerPublisher(Publisher(store), close_wait_s=-1)
    with pytest.raises(UsageError, match="dtype must be one of"):
        TrainerPublisher(Publisher(store), dtype="fp8")
    with pytest.raises(UsageError, match="version must be an integer"):
        TrainerPublisher(Publisher(store)).submit({}, -1)


def test_submit_returns_after_the_host_copy_and_the_caller_may_change_its_tensors() -> None:
    store = memory()
    gated = Gated(store)
    weights = model(big=1000)
    at_submit = expected(weights)
    with TrainerPublisher(gated, dtype="bf16") as trainer:
        future = trainer.submit(weights, 0)  # the trainer's own tensors, not copies
        assert gated.started.acquire(timeout=60)
        assert not future.done() and trainer.in_flight == 0
        step(weights, 1)  # training goes on, in place, while v0 publishes
        gated.go.release()
        done = future.result(60)
    assert isinstance(done, Publication) and done.published
    assert done.result is not None and (done.result.version, done.result.kind) == (0, "full")
    assert pulled(store, 0) == at_submit, "v0 is the weights as they were at the submit"
    assert at_submit != expected(weights)


def test_the_next_submit_waits_for_the_publication_in_flight() -> None:
    """One publication at a time: the host copy is overwritten only once it is done."""
    store = memory()
    gated = Gated(store)
    trainer = TrainerPublisher(gated, dtype="bf16")
    weights = model(big=1000)
    first = trainer.submit(weights, 0)
    assert gated.started.acquire(timeout=60)
    futures: list[Any] = []
    second = threading.Thread(target=lambda: futures.append(trainer.submit(gen(weights), 1)))
    second.start()
    second.join(0.5)
    assert second.is_alive() and not first.done(), "the second submit did not wait"
    gated.go.release()
    second.join(60)
    assert first.result(60).published and futures
    gated.go.release()
    assert futures[0].result(60).result.kind == "delta"
    assert trainer.close() and pulled(store, 1) == expected(weights)


def test_a_failed_publication_is_raised_at_the_next_submit_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = memory()
    trainer = TrainerPublisher(Publisher(store))
    failed = trainer.submit(BAD, 0)
    assert trainer.wait(60)
    assert "the background publication of v0 failed; the next submit raises it" in caplog.text
    weights = model(big=1000)
    with pytest.raises(PublicationFailedError, match=r"v0 failed: UsageError: tensor name") as info:
        trainer.submit(weights, 1)
    assert isinstance(info.value, WanrlError) and isinstance(info.value.__cause__, UsageError)
    assert info.value.exit_code == UsageError.exit_code
    assert failed.exception() is info.value  # the future holds the same failure
    assert trainer.submit(weights, 1).result(60).published  # raised once; the run goes on
    assert trainer.close()


def test_a_failure_seen_through_result_is_not_raised_again() -> None:
    trainer = TrainerPublisher(Publisher(memory()))
    with pytest.raises(PublicationFailedError, match="v0 failed: UsageError"):
        trainer.submit(BAD, 0).result(60)
    assert trainer.submit(model(big=10), 1).result(60).published
    assert trainer.close()


def test_close_surfaces_a_publication_thread_that_died_unseen() -> None:
    trainer = TrainerPublisher(Dying(memory()))
    trainer.submit(model(big=10), 0)
    with pytest.raises(PublicationFailedError, match="v0 failed: RuntimeError: the publication"):
        trainer.close()
    assert trainer.close() is True  # raised once
    with pytest.raises(UsageError, match="closed"):
        trainer.submit(model(big=10), 1)
    # leaving a with block raises it; the block's own error is not hidden by it
    raised = pytest.raises(PublicationFailedError, match="thread died")
    with raised, TrainerPublisher(Dying(memory())) as dying:
        dying.submit(model(big=10), 0)
    with pytest.raises(KeyError, match="the trainer's own"), TrainerPublisher(Dying(memory())) as t:
        t.submit(model(big=10), 0)
        assert t.wait(60)
        raise KeyError("the trainer's own failure")


def test_what_stops_the_run_and_what_does_not(
    s3_url: str, s3_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    weights = model(big=1000)
    # a wrong bucket: the first publication's store error is fatal
    wrong = open_store("s3://no-such-bkt/r", endpoint_url=s3_endpoint)
    future = TrainerPublisher(Publisher(wrong)).submit(weights, 0)
    with pytest.raises(PublicationFailedError, match="first publication to s3://no-such") as info:
        future.result(60)
    assert isinstance(info.value.__cause__, StoreError) and info.value.exit_code == 6
    # the store reached, then gone: an outage, logged and ridden out
    where = {"store_url": s3_url, "endpoint_url": s3_endpoint}
    trainer = TrainerPublisher(Publisher(open_store(s3_url, endpoint_url=s3_endpoint)))
    assert trainer.submit(weights, 0).result(60).published
    delete_bucket(where)
    gone = trainer.submit(weights, 1).result(60)
    assert not gone.published and isinstance(gone.failed, StoreError) and gone.result is None
    assert "the publication of v1 failed; the trainer goes on" in caplog.text
    assert trainer.close()  # an outage is no failure to raise


def test_a_restarted_trainer_adopts_the_newest_and_skips_what_the_store_holds() -> None:
    store = memory()
    weights = model(big=1000)
    with TrainerPublisher(Publisher(store), dtype="bf16") as trainer:
        trainer.submit(weights, 5)
    restarted = TrainerPublisher(Publisher(store), dtype="bf16")
    skipped = restarted.submit(weights, 5).result(60)
    assert not skipped.published and skipped.skipped is not None and skipped.version == 5
    step(weights, 6)
    done = restarted.submit(gen(weights), 6).result(60).result
    assert done is not None and (done.kind, done.base_version) == ("delta", 5)
    assert restarted.close() and pulled(store, 6) == expected(weights)


def test_without_adopting_the_newest_the_first_version_is_a_keyframe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``adopt_newest=False``, or its old spelling ``resume=False`` (one warning)."""
    from wanrl_s3 import _exports

    store = memory()
    weights = model(big=1000)
    with TrainerPublisher(Publisher(store), background=False) as trainer:
        trainer.submit(weights, 5)
    step(weights, 6)
    fresh = TrainerPublisher(Publisher(store), background=False, adopt_newest=False)
    done = fresh.submit(gen(weights), 6).result().result
    assert done is not None and done.kind == "full"
    monkeypatch.setattr(_exports, "_warned", set())
    with pytest.warns(DeprecationWarning, match=r"TrainerPublisher\(resume=\) is deprecated"):
        old = TrainerPublisher(Publisher(store), background=False, resume=False)
    step(weights, 7)
    done = old.submit(gen(weights), 7).result().result
    assert done is not None and done.kind == "full"


def test_an_unsigned_trainer_is_refused_a_signed_run_unless_it_allows_it() -> None:
    """Readers that verify would refuse every unsigned version: fatal at the first
    publication, nothing published; ``allow_unsigned`` says it is meant."""
    store = memory()
    Publisher(store, signer=Signer(generate_keypair()[0])).publish(model(big=10), 0)
    trainer = TrainerPublisher(Publisher(store), background=False)
    with pytest.raises(UsageError, match=r"holds a signed run .*allow_unsigned"):
        trainer.submit(model(big=10), 1)
    assert not store.exists(layout.manifest_key(1))
    allowed = TrainerPublisher(Publisher(store), background=False, allow_unsigned=True)
    assert allowed.submit(model(big=10), 1).result().published


def test_only_the_committing_rank_needs_the_signer_of_a_signed_run() -> None:
    store = memory()
    signer = Signer(generate_keypair()[0])
    Publisher(store, signer=signer).publish(model(big=10), 0)
    ranks = [
        ShardedPublisher(store, rank=r, ranks=2, run_id="two", signer=signer if r == 0 else None)
        for r in (0, 1)
    ]
    trainers = [TrainerPublisher(p) for p in ranks]
    futures = [t.submit(model(big=100), 1) for t in trainers]
    assert all(f.result(60).published for f in futures)
    with Subscriber(store, verifier=signer.verifier()) as sub:
        assert sub.manifest(1).signature is not None
    assert all(t.close() for t in trainers)


def test_a_restarted_trainer_adopts_a_base_the_readers_keyring_trusts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A rotated key: the old key's versions are a delta base only while the readers'
    keyring (``verifier``) still holds the old key; the new key alone trusts none."""
    caplog.set_level(logging.INFO, logger="wanrl_s3")
    (old, old_pub), (new, new_pub) = generate_keypair(), generate_keypair()
    weights = model(big=1000)
    for keyring, kind in ((None, "full"), (Verifier([old_pub, new_pub]), "delta")):
        store = memory()
        TrainerPublisher(Publisher(store, signer=Signer(old)), background=False).submit(weights, 0)
        restarted = TrainerPublisher(
            Publisher(store, signer=Signer(new)), background=False, verifier=keyring
        )
        step(weights, 1)
        done = restarted.submit(weights, 1).result().result
        assert done is not None and done.kind == kind
        with Subscriber(store, verifier=Verifier([old_pub, new_pub])) as sub:
            assert digests(sub.fetch(1).to_torch()) == digests(weights)
    assert "the next publication is a keyframe (no base adopted)" in caplog.text


def test_without_background_submit_publishes_before_it_returns() -> None:
    store = memory()
    trainer = TrainerPublisher(Publisher(store), dtype="bf16", background=False)
    weights = model(big=1000)
    future = trainer.submit(gen(weights), 0)
    assert future.done() and future.result().published and trainer.host_bytes == 0
    assert pulled(store, 0) == expected(weights)
    with pytest.raises(UsageError, match="tensor name"):  # a fatal error: raised as it is
        trainer.submit(BAD, 1)


def test_numpy_weights_publish_in_bf16_through_the_host_copy() -> None:
    store = memory()
    weights = {"w": np.linspace(-3, 3, 4096, dtype=np.float32), "ids": np.arange(9)}
    with TrainerPublisher(Publisher(store), dtype="bf16") as trainer:
        future = trainer.submit(weights, 0)
        weights["w"][:] = 0  # the caller's arrays change: the published copy does not
        assert future.result(60).published
    with Subscriber(store) as sub:
        got = sub.fetch(0).tensors
    want = np.linspace(-3, 3, 4096, dtype=np.float32).astype(ml_dtypes.bfloat16)
    assert got["w"].dtype == want.dtype and got["w"].tobytes() == want.tobytes()
    assert got["ids"].tolist() == list(range(9))


def test_two_ranks_each_copy_their_share_and_commit_one_version() -> None:
    store = memory()
    weights = model(big=100_000)
    trainers = [
        TrainerPublisher(ShardedPublisher(store, rank=r, ranks=2, run_id="two"), dtype="bf16")
        for r in (0, 1)
    ]
    futures = [t.submit(gen(weights), 0) for t in trainers]  # each returns after its copy
    shares = [set(t._buffers.buffers) for t in trainers]  # type: ignore[union-attr]
    assert shares[0].isdisjoint(shares[1]) and shares[0] | shares[1] == set(weights)
    held = [t.host_bytes for t in trainers]
    assert sum(held) == sum(t.numel() * t.element_size() for t in as_published(weights).values())
    done = [f.result(60) for f in futures]
    assert done[0].result is not None and done[1].result is None and done[1].published
    assert pulled(store, 0) == expected(weights)
    assert all(t.close() for t in trainers)


def test_restarted_ranks_continue_from_the_store_each_with_its_own_share() -> None:
    """A new launch of two ranks: each adopts its host copy's share of the newest version,
    so the launch's first version is a delta from both ranks."""
    store = memory()
    weights = model(big=100_000)

    def launch(run_id: str) -> list[TrainerPublisher]:
        return [
            TrainerPublisher(
                ShardedPublisher(store, rank=r, ranks=2, run_id=run_id, poll_s=0.05), dtype="bf16"
            )
            for r in (0, 1)
        ]

    first = launch("two")
    assert all(f.result(60).published for f in [t.submit(gen(weights), 0) for t in first])
    assert all(t.close() for t in first)
    step(weights, 1)
    again = launch("two-b")
    done = [f.result(60) for f in [t.submit(gen(weights), 1) for t in again]]
    committed = done[0].result
    assert committed is not None and committed.kind == "delta" and done[1].published
    shares = [set(t._buffers.buffers) for t in again]  # type: ignore[union-attr]
    with Subscriber(store) as sub:
        deltas = {t.name for t in sub.manifest(1).tensors if t.encoding == "xor-delta"}
    assert all(share & deltas for share in shares)
    assert pulled(store, 1) == expected(weights)
    assert all(t.close() for t in again)


def test_a_publications_seconds_are_on_the_injected_clock() -> None:
    clock = FakeClock()
    gated = Gated(memory(), clock=clock)
    trainer = TrainerPublisher(gated, clock=clock)
    future = trainer.submit(model(big=10), 0)
    gated.go.release()
    assert future.result(60).seconds == 7.5


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_host_memory_holds_one_copy_whatever_the_number_of_publications(
    s3_url: str, s3_endpoint: str
) -> None:
    trainer = TrainerPublisher(
        Publisher(open_store(s3_url, endpoint_url=s3_endpoint)), dtype="bf16"
    )
    weights = model(big=16_000_000)  # 34 MB in bf16
    snapshot_bytes = sum(t.numel() * t.element_size() for t in as_published(weights).values())
    trainer.submit(gen(weights), 0).result(60)
    buffers = trainer._buffers
    assert buffers is not None and trainer.host_bytes == snapshot_bytes
    ptrs = {n: t.data_ptr() for n, t in buffers.buffers.items()}
    step(weights, 1)
    trainer.submit(gen(weights), 1).result(60)  # the first delta: the working set settles
    before = rss_bytes()
    for g in range(2, 7):
        step(weights, g)
        done = trainer.submit(gen(weights), g).result(60).result
        assert done is not None and done.kind == "delta"
        assert {n: t.data_ptr() for n, t in buffers.buffers.items()} == ptrs
    grown = rss_bytes() - before
    assert grown < snapshot_bytes, f"{grown} bytes more after 5 publications"
    assert trainer.close()


def test_a_restarted_trainer_says_which_version_it_continues_from(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wanrl_s3")
    store = memory()
    with TrainerPublisher(Publisher(store)) as trainer:
        trainer.submit(model(big=10), 0).result(60)
    restarted = TrainerPublisher(Publisher(store))
    restarted.submit(model(big=10), 1).result(60)
    assert "continuing from v0 in memory://" in caplog.text


def test_the_trainer_core_imports_no_torch() -> None:
    """torch is optional in the core: a numpy trainer never loads it."""
    code = (
        "import sys; from wanrl_s3 import TrainerPublisher, RankGroup, VersionPublisher; "
        "import wanrl_s3.trainer.background, wanrl_s3.trainer.share; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "False"
