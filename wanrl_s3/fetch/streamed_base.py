"""A published version as a delta base, fetched and verified a few tensors ahead.

A one-shot ``wanrl-s3 publish`` that continues a run needs the newest version's
bits to encode its delta against. Downloading that version whole costs 1x the
snapshot in memory (2x with the publisher's own copy); a 70B base does not fit
next to anything. :class:`StreamedBase` is the mapping the publisher adopts
instead (``Publisher.adopt_base(..., borrow=True)``): its values are scratch
arrays that hold no memory until :meth:`load` fills one, verified against the
manifest like any fetch, and :meth:`drop` frees it again. The caller loads each
tensor just before the publisher encodes it and drops it right after
(:class:`wanrl_s3.io.source.StreamedSource`'s hooks).

Fetched one at a time when asked for, each base tensor's round trips would add
to the encoding instead of overlapping it, one request per tensor at least (a
1 GiB delta publish took twice as long as with the base downloaded whole). So
:meth:`load` also starts fetching the tensors that come next in ``order`` (the
source's order, which is the order the publisher encodes in), in groups of
consecutive tensors of up to ``ahead_bytes / 2`` (one stream each, adjacent
tensors in one request), while the output bytes fetched or in flight but not
yet loaded fit in ``ahead_bytes``. Resident base memory is therefore the tensor
being encoded plus at most ``ahead_bytes``, and the coded payload of the groups
in flight. A tensor bigger than ``ahead_bytes``, or asked for out of that order,
is fetched on demand (the prefetch goes on after it). A tensor in
a group that failed its checks is fetched again on its own when loaded, so a
damaged tensor fails the :meth:`load` of that tensor only, as a fetch on demand
would (the caller then publishes a keyframe); one never loaded fails nothing.

The publisher copies the mapping at adoption and reads only the tensor it is
encoding; a value read before its :meth:`load` would be zeros. That is why the
loading is tied to the source's iteration, never left to the caller's memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..errors import VerificationError
from ..format import dtypes
from ..io.pages import discard, scratch
from ..units import MiB, require_int
from .subscriber import Subscriber, VerifiedOnLoad

AHEAD_BYTES = 32 * MiB  # base tensors fetched ahead of the encoder; a bigger one: on demand
AHEAD_THREADS = 2  # groups fetched at once; each spreads its requests on the subscriber's pool


class StreamedBase(VerifiedOnLoad):
    """The tensors of ``version`` from ``sub``'s store, each one loaded on request and
    the next ones in ``order`` (default: the manifest's) fetched ahead meanwhile."""

    def __init__(
        self,
        sub: Subscriber,
        version: int,
        *,
        order: Iterable[str] | None = None,
        ahead_bytes: int = AHEAD_BYTES,
        threads: int = AHEAD_THREADS,
    ) -> None:
        """``ahead_bytes=0`` fetches nothing ahead: every tensor on demand. Groups fetched
        ahead hold up to ``ahead_bytes // 2`` (at least one tensor)."""
        self.ahead_bytes = require_int("ahead_bytes", ahead_bytes, minimum=0)
        self.threads = require_int("threads", threads)
        self.sub = sub
        self.plan = sub.plan(version)  # from its keyframe: nothing local is trusted
        self.manifest = self.plan.target
        self._arrays = {
            e.name: scratch(e.shape, dtypes.by_name(e.dtype).numpy) for e in self.manifest.tensors
        }
        names = self._arrays if order is None else order
        self._order = [n for n in dict.fromkeys(names) if n in self._arrays]
        self._position = {n: i for i, n in enumerate(self._order)}
        self._next = 0  # the first position of _order not yet fetched or passed over
        self._ahead: dict[str, Future[None]] = {}  # fetched or in flight, not yet loaded: its
        # group's fetch
        self._ahead_size = 0
        self._pool: ThreadPoolExecutor | None = None
        self._loaded: set[str] = set()
        self.on_demand = 0  # loads that found their tensor not fetched ahead
        self.failed: str | None = None  # what did not verify; the caller publishes a keyframe

    @property
    def version(self) -> int:
        return self.manifest.version

    @property
    def ahead(self) -> tuple[str, ...]:
        """The tensors fetched or being fetched ahead of the encoder, in order."""
        return tuple(self._ahead)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def load(self, name: str) -> None:
        """Tensor ``name`` verified in its array (a name the base lacks: nothing), and the
        tensors after it in ``order`` fetched ahead as far as ``ahead_bytes`` allows."""
        if name not in self._arrays or name in self._loaded:
            return
        future = self._take(name)
        position = self._position.get(name, -1)
        self._next = max(self._next, position + 1)  # what it passed over: on demand
        self._top_up()
        try:
            if future is None:
                self.on_demand += 1
                self._fetch([name])
            else:
                _wait(future, lambda: self._fetch([name]))
        except VerificationError as exc:
            self.failed = f"tensor {name!r} of v{self.version}: {exc}"
            raise
        self._loaded.add(name)

    def drop(self, name: str) -> None:
        """Free tensor ``name``'s memory; it is not read again."""
        _settle(self._take(name))
        if name in self._arrays:
            discard(self._arrays[name])
        self._loaded.discard(name)

    def close(self) -> None:
        """Stop fetching ahead and free every tensor (after the publication, or before a
        keyframe that no longer needs the base)."""
        for name in list(self._ahead):
            self.drop(name)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for name in list(self._loaded):
            self.drop(name)

    def __enter__(self) -> StreamedBase:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _fetch(self, names: list[str]) -> None:
        self.sub.fetch_tensors(self.plan, {n: self._arrays[n] for n in names})

    def _take(self, name: str) -> Future[None] | None:
        """Stop counting ``name`` as ahead; its fetch, if one was started."""
        future = self._ahead.pop(name, None)
        if future is not None:
            self._ahead_size -= self._arrays[name].nbytes
        return future

    def _top_up(self) -> None:
        """Start fetching the next groups in order while what is ahead fits the bound."""
        while self.ahead_bytes and self._next < len(self._order):
            group = self._group(self._next)
            size = sum(self._arrays[n].nbytes for n in group)
            if self._ahead_size + size > self.ahead_bytes:  # a bigger tensor: on demand
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="wanrl-base")
            future = self._pool.submit(self._fetch, group)
            self._ahead.update(dict.fromkeys(group, future))
            self._ahead_size += size
            self._next += len(group)

    def _group(self, start: int) -> list[str]:
        """The tensors from position ``start`` on that fit ``ahead_bytes // 2`` (one at least)."""
        group: list[str] = []
        size = 0
        for name in self._order[start:]:
            size += self._arrays[name].nbytes
            if group and size > self.ahead_bytes // 2:
                break
            group.append(name)
        return group


def _wait(future: Future[None], alone: Callable[[], None]) -> None:
    """A group's fetch done; if it failed a check, the tensor fetched ``alone`` decides."""
    try:
        future.result()
    except VerificationError:
        alone()


def _settle(future: Future[None] | None) -> None:
    """Cancel a fetch not started yet, or wait for one running; its outcome is not needed."""
    if future is not None and not future.cancel():
        with contextlib.suppress(Exception):
            future.result()
