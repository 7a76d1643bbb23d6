"""The learner's publishing side: one Publisher per run, fanned out to both regions.

Publishing runs on background threads so the learner keeps training while a
version uploads. The policy channel publishes every version in order; the large
model's channel publishes the newest version it was asked for and skips any it
could not get to (a version is a complete state, so skipping one loses nothing).

Every publication is recorded with what the bucket received (kind, stored
bytes) and what the bits really did: the fraction of bf16 values that changed
since the previous version and, for a full version, how big a delta would have
been. That is how the report can say *why* ``--delta auto`` chose what it chose.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import blake3
import numpy as np

from wanrl_s3 import ObjectStore, PublishConfig, Publisher, to_numpy
from wanrl_s3.codec import encode_delta

State = Mapping[str, Any]  # name -> bf16 torch tensor or numpy array


@dataclass(frozen=True)
class VersionRecord:
    """One publication as the learner saw it."""

    run: str
    version: int
    kind: str
    base_version: int | None
    raw_bytes: int
    stored_bytes: int
    changed_fraction: float | None  # bf16 values that differ from the previous version
    delta_bytes: int | None  # what a delta against the previous version takes (measured)
    reason: str
    encode_s: float  # until the last tensor was encoded and handed to the uploads
    upload_commit_s: float  # the uploads' tail, the manifest in each region, LATEST
    total_s: float
    published_at_s: float  # wall clock when publish() returned
    digest: str  # BLAKE3 of the published bits (rl_demo_publish.digest), for the end-to-end check

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def digest(state_bits: Mapping[str, np.ndarray]) -> str:
    """BLAKE3 over every tensor's name and bits, in name order: one value per version."""
    h = blake3.blake3()
    for name in sorted(state_bits):
        h.update(name.encode())
        h.update(np.ascontiguousarray(state_bits[name]).view(np.uint8).tobytes())
    return str(h.hexdigest())


def _bits(state: State) -> dict[str, np.ndarray]:
    return {name: to_numpy(t, name=name).view(np.uint16).copy() for name, t in state.items()}


def _delta_bytes(
    old: Mapping[str, np.ndarray], new: Mapping[str, np.ndarray], config: PublishConfig
) -> int:
    """What a delta version against ``old`` would store, encoded as the Publisher does:
    each tensor as an XOR delta, or raw where its delta passes the same fraction."""
    total = 0
    for name, arr in new.items():
        limit = int(arr.nbytes * config.max_delta_fraction)
        payload = encode_delta(old[name], arr, level=config.zstd_level, max_bytes=limit)
        total += arr.nbytes if payload is None else len(payload.data)
    return total


class RunPublisher:
    """A Publisher for one run, plus the record of every version it published."""

    def __init__(self, run: str, stores: Sequence[ObjectStore], config: PublishConfig) -> None:
        self.run = run
        self.config = config
        self.publisher = Publisher(stores, config, run_id=f"demo-{run}")
        self.records: list[VersionRecord] = []
        self._prev: dict[str, np.ndarray] | None = None
        self._since_full = 0  # versions published since the last full one
        self._last_full: int | None = None  # that full version

    def publish(self, version: int, state: State) -> VersionRecord:
        start = time.perf_counter()
        encoded = [start]

        def progress(_: int) -> None:
            encoded[0] = time.perf_counter()

        res = self.publisher.publish(state, version, progress=progress)
        done_at = time.time()
        new = _bits(state)
        changed, delta = self._compare(new, res.kind, res.stored_bytes)
        encode_s = encoded[0] - start
        record = VersionRecord(
            self.run, version, res.kind, res.base_version, res.raw_bytes, res.stored_bytes,
            changed, delta, self._reason(res.kind, res.raw_bytes, delta), encode_s,
            res.seconds - encode_s, res.seconds, done_at, digest(new),
        )  # fmt: skip
        self._prev = new
        self._since_full = 0 if res.kind == "full" else self._since_full + 1
        self._last_full = version if res.kind == "full" else self._last_full
        self.records.append(record)
        return record

    def _compare(
        self, new: dict[str, np.ndarray], kind: str, stored: int
    ) -> tuple[float | None, int | None]:
        prev = self._prev
        if prev is None or set(prev) != set(new):
            return None, None
        total = sum(a.size for a in new.values())
        changed = sum(int(np.count_nonzero(prev[n] != a)) for n, a in new.items())
        return changed / total, stored if kind == "delta" else _delta_bytes(prev, new, self.config)

    def _reason(self, kind: str, raw: int, delta: int | None) -> str:
        limit = self.config.max_delta_fraction
        if kind == "delta":
            return f"delta: {delta / raw:.2%} of a full snapshot" if delta else "delta"
        if delta is None:
            return "first version: a full keyframe"
        if self.config.delta == "never":
            return "--delta never"
        if delta > limit * raw:
            return (
                f"full: a delta would be {delta / raw:.0%} of the snapshot "
                f"(auto ships deltas under {limit:.0%})"
            )
        if self._since_full + 1 >= self.config.keyframe_every:
            return (  # not every version number is published (kappa), nor every one asked for
                f"scheduled keyframe: {self.config.keyframe_every} publications after the full "
                f"v{self._last_full} (keyframe_every counts publications)"
            )
        return f"full: a delta would be {delta / raw:.1%} of the snapshot, at the {limit:.0%} limit"


class Channel:
    """A background thread that publishes what the learner submits.

    ``latest_only``: publish the newest submission and drop older pending ones.
    A submission is a state or a function that makes one (run on this thread).
    """

    def __init__(self, run: RunPublisher, *, latest_only: bool) -> None:
        self.run = run
        self.latest_only = latest_only
        self._pending: list[tuple[int, State | Callable[[int], State]]] = []
        self._busy = False
        self._closed = False
        self.error: BaseException | None = None
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=f"publish-{run.run}", daemon=True)
        self._thread.start()

    def submit(self, version: int, state: State | Callable[[int], State]) -> None:
        with self._cv:
            self._pending.append((version, state))
            self._cv.notify_all()

    def flush(self, timeout_s: float = 120.0) -> None:
        """Wait until every submission is published (or skipped); re-raise a failure."""
        with self._cv:
            self._cv.wait_for(lambda: not (self._pending or self._busy), timeout_s)
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(30)

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    return
                take = len(self._pending) if self.latest_only else 1
                version, state = self._pending[take - 1]
                del self._pending[:take]
                self._busy = True
            try:
                self.run.publish(version, state(version) if callable(state) else state)
            except BaseException as exc:  # surfaced by flush(), on the learner's thread
                self.error = exc
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()


class LargeModel:
    """The second run: a LLaMA-shaped bf16 model whose versions each move ``density`` of it.

    This is what RL at a low learning rate does to a large model (most bf16
    values round back to where they were; see wanrl_s3.testing's synthetic
    module), made at an exact density with ``nudge_state``. It is the case where
    deltas pay; the small policy above is the case where they do not.
    """

    def __init__(
        self, layout: list[tuple[str, tuple[int, ...]]], density: float, seed: int
    ) -> None:
        from wanrl_s3.testing import random_bf16_state

        self.density = density
        self.state: dict[str, np.ndarray] = random_bf16_state(layout, seed=seed)
        self._first = True

    def version(self, version: int) -> dict[str, np.ndarray]:
        """The state to publish as ``version``: the initial one, then one nudge per call."""
        from wanrl_s3.testing import nudge_state

        if not self._first:
            self.state = nudge_state(self.state, self.density, seed=version)
        self._first = False
        return self.state
