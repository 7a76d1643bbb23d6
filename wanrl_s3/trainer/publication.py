"""What any trainer calls to publish its policy: :class:`TrainerPublisher`.

``submit(weights, version)`` copies the weights into host buffers (one reusable
copy, cast to their published dtype) and returns a ``Future[Publication]``
while the publication (encode, upload, commit, LATEST) runs on a background
thread: the caller's sync returns and training goes on, free to change its
tensors. The next submit waits for a publication still running: one at a time,
so host memory stays one copy of the weights.

What stops the run, and what does not (one policy for every trainer):

* the store already holds this version or a newer one (a restarted run): logged,
  nothing published, :attr:`Publication.skipped`;
* a store error once the store was reached (an outage): logged, nothing published,
  :attr:`Publication.failed`; rollout keeps its weights until the next publication,
  and the staleness filter bounds the cost;
* a store error before the store was ever reached (a wrong bucket or credentials),
  and anything that is not a store error: fatal. It is the future's exception,
  :class:`~wanrl_s3.errors.PublicationFailedError` raised ``from`` the cause and
  logged when it happens; ``result()`` raises it, or else the next ``submit`` (or
  ``close``) does, once.

With ``background=False`` submit publishes before it returns, under the same
policy, and raises a fatal error itself. At the first publication a
:class:`~wanrl_s3.Publisher` continues from the store's newest version (a delta,
not a keyframe, when the readers trust that version's chain), and a publisher
with no signer is refused a store whose LATEST is signed (fatal, unless
``allow_unsigned``): every reader that verifies would refuse what it publishes.
Given a :class:`~wanrl_s3.ShardedPublisher`, every rank makes the same calls; in
``balanced`` mode each rank's host copy holds its share only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

from .._exports import renamed_keywords
from ..errors import PublicationFailedError, StoreError, UsageError, VersionConflictError
from ..format import layout
from ..io.tensors import StateDict, iter_items
from ..publish.adopt import adopt_newest, check_signing
from ..publish.publisher import Publisher, PublishResult
from ..publish.shard import ShardedPublisher
from ..store import SYSTEM_CLOCK, Clock
from ..units import require_non_negative
from .background import Background, PublicationFuture
from .host_copy import HostBuffers, cast_stream, check_publish_dtype
from .observer import IGNORE, PublicationObserver
from .protocol import VersionPublisher
from .share import BalancedShare

if TYPE_CHECKING:
    from ..format.signing import Verifier

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Publication:
    """How one submitted version ended without stopping the run: its future's value."""

    version: int
    seconds: float  # from the start of its publication (adopting a base included) to its end
    result: PublishResult | None = None  # the committed version's figures (committing rank)
    skipped: VersionConflictError | None = None  # the store already held it, or a newer one
    failed: StoreError | None = None  # an outage once the store was reached

    @property
    def published(self) -> bool:
        """Whether this rank's tensors are in the committed version."""
        return self.skipped is None and self.failed is None


@renamed_keywords({"resume": "adopt_newest"}, attributes=False)
class TrainerPublisher:
    """Publishes a trainer's weights off its critical path (see the module docstring).

    ``publisher``: a :class:`~wanrl_s3.VersionPublisher` (a Publisher, or this rank's
    ShardedPublisher). ``dtype``: "keep", or "bf16" to publish floating tensors in
    bf16. ``background=False``: submit publishes before it returns (no host copy).
    ``adopt_newest``: at the first publication, take the store's newest version as the
    delta base (continue the run). ``verifier``: the keys the readers trust (their
    ``--verify-key``): a Publisher adopts a base only from a version whose chain one of
    them signed, else its first version is a keyframe (default: its signer's own key;
    unsigned, any base).
    ``allow_unsigned``: publish without a signer onto a store whose LATEST is signed.
    ``close_wait_s``: how long closing, or the interpreter's exit, waits for a
    publication in flight. ``clock``: what times the publications (tests: fake time).
    ``observer``: told how each publication ended (:class:`wanrl_s3.TrainerMetrics`).
    """

    def __init__(
        self,
        publisher: VersionPublisher,
        *,
        dtype: str = "keep",
        background: bool = True,
        adopt_newest: bool = True,
        verifier: Verifier | None = None,
        allow_unsigned: bool = False,
        close_wait_s: float = 600.0,
        clock: Clock | None = None,
        observer: PublicationObserver = IGNORE,
    ) -> None:
        if not isinstance(publisher, VersionPublisher):
            raise UsageError(
                "TrainerPublisher needs a Publisher or a ShardedPublisher (a VersionPublisher), "
                f"got {type(publisher).__name__}"
            )
        self.publisher = publisher
        self.dtype = check_publish_dtype(dtype)
        self.clock = clock or SYSTEM_CLOCK
        self.observer = observer
        wait_s = require_non_negative("close_wait_s", close_wait_s)
        self._background = Background(wait_s, self.clock) if background else None
        self._buffers = HostBuffers(self.dtype) if background else None
        self._adopt = adopt_newest
        self._verifier = verifier
        self._allow_unsigned = allow_unsigned
        self._started = False  # the first publication's checks (signing, adopting) are done
        self._reached_store = False  # a publication went through (or found its version there)
        self._last: PublicationFuture[Publication] | None = None
        self._closed = False

    @property
    def in_flight(self) -> int | None:
        """The version publishing in the background, or None."""
        return None if self._background is None else self._background.in_flight

    @property
    def host_bytes(self) -> int:
        """Host memory the copies of the last submit hold (this rank's share of them)."""
        return 0 if self._buffers is None else self._buffers.nbytes

    def submit(
        self, weights: StateDict, version: int, *, metadata: Mapping[str, str] | None = None
    ) -> Future[Publication]:
        """Publish ``weights`` (a mapping, or (name, tensor) pairs) as ``version``.

        Returns once they are copied to host memory (or, without background, once
        published). Waits first for the previous publication, and raises its failure
        (:class:`~wanrl_s3.errors.PublicationFailedError`) if its future has not.
        """
        if self._closed:
            raise UsageError("this TrainerPublisher is closed: make a new one to publish")
        layout.check_version(version)
        self.wait()
        self._raise_unseen()
        selector = self.publisher.share_selector()
        share = None if selector is None else BalancedShare(selector)
        meta = dict(metadata or {})
        if self._background is None or self._buffers is None:
            done: PublicationFuture[Publication] = PublicationFuture()
            done.set_running_or_notify_cancel()
            stream = cast_stream(iter_items(weights), self.dtype, share)
            done.set_result(self._publish(stream, version, meta))
            return done
        tensors = self._buffers.fill(iter_items(weights), share)
        job = partial(self._publish, tensors, version, meta)
        self._last = self._background.start(version, job)
        return self._last

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the publication in flight; True when none is (left) in flight."""
        return True if self._background is None else self._background.wait(timeout_s)

    def close(self) -> bool:
        """Stop taking submits; let a publication in flight finish (``close_wait_s`` at most).

        True if none is left in flight. Raises a failure no one has seen yet. A
        publication given up on is not cancelled: it is visible only if it commits,
        whole, before the process ends.
        """
        self._closed = True
        finished = True if self._background is None else self._background.finish()
        self._raise_unseen()
        return finished

    def __enter__(self) -> TrainerPublisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        with contextlib.suppress(PublicationFailedError):  # logged when it happened
            self.close()  # and the body's error goes on

    def _raise_unseen(self) -> None:
        last = self._last
        failure = None if last is None or last.seen else last.failure()
        if last is not None and failure is not None:
            last.seen = True
            raise failure

    def _publish(
        self, tensors: StateDict, version: int, metadata: Mapping[str, str]
    ) -> Publication:
        """One publication under the policy of the module docstring, told to the observer."""
        try:
            done = self._publish_under_policy(tensors, version, metadata)
        except Exception as exc:
            self.observer.fatal(version, exc)
            raise
        self.observer.published(done)
        return done

    def _publish_under_policy(
        self, tensors: StateDict, version: int, metadata: Mapping[str, str]
    ) -> Publication:
        start = self.clock.monotonic()
        try:
            if not self._started:
                self._started = True
                self._check_signing()
                if self._adopt:
                    self._adopt_newest(version)
            result = self.publisher.publish(tensors, version, metadata=metadata)
        except VersionConflictError as exc:
            self._reached_store = True
            log.warning(
                "wanrl_s3: not publishing v%d: %s (a continued run: the store already holds "
                "this version or a newer one)",
                version,
                exc,
            )
            return Publication(version=version, seconds=self.clock.monotonic() - start, skipped=exc)
        except StoreError as exc:
            if not self._reached_store:  # a bad URL or credentials: fail at once, loudly
                raise StoreError(f"the first publication to {self._where} failed: {exc}") from exc
            log.error(
                "wanrl_s3: the publication of v%d failed; the trainer goes on and rollout keeps "
                "its current weights until the next one: %s",
                version,
                exc,
            )
            return Publication(version=version, seconds=self.clock.monotonic() - start, failed=exc)
        self._reached_store = True
        return Publication(version=version, seconds=self.clock.monotonic() - start, result=result)

    def _check_signing(self) -> None:
        """Refuse to publish unsigned onto a signed run (the rank that commits decides)."""
        publisher = self.publisher
        if isinstance(publisher, ShardedPublisher) and not publisher.is_committer:
            return  # its shares are committed, and signed, by the committing rank
        if not isinstance(publisher, Publisher | ShardedPublisher):
            return  # another VersionPublisher: how it signs is its own
        check_signing(
            publisher.stores[0],
            publisher.signer is not None,
            unsigned_ok=self._allow_unsigned,
            fix="give the publisher the run's signer, or allow_unsigned to publish unsigned anyway",
        )

    def _adopt_newest(self, version: int) -> None:
        """Continue from the store's newest version: the first publication is a delta."""
        publisher = self.publisher
        if publisher.config.delta == "never":
            return
        if isinstance(publisher, ShardedPublisher):
            # this rank's share: the tensors its host copy holds (not known before the
            # stream without one: the rank then takes part in the choice, and sends whole)
            names = None if self._buffers is None else list(self._buffers.buffers)
            point = publisher.adopt_newest(version, names, verifier=self._verifier)
        elif isinstance(publisher, Publisher):
            point = adopt_newest(publisher, verifier=self._verifier)
        else:
            return  # another VersionPublisher: how it continues a run is its own
        if point is not None:
            self._reached_store = True
            log.info(
                "wanrl_s3: continuing from v%d in %s: the next publication is a %s",
                point.version,
                self._where,
                "delta against it" if point.adopted else "keyframe (no base adopted)",
            )

    @property
    def _where(self) -> str:
        return ", ".join(store.url for store in self.publisher.stores)
