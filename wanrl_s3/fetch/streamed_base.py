"""A published version as a delta base, fetched and verified one tensor at a time.

A one-shot ``wanrl-s3 publish`` that continues a run needs the newest version's
bits to encode its delta against. Downloading that version whole costs 1x the
snapshot in memory (2x with the publisher's own copy); a 70B base does not fit
next to anything. :class:`StreamedBase` is the mapping the publisher adopts
instead (``Publisher.adopt_base(..., borrow=True)``): its values are scratch
arrays that hold no memory until :meth:`load` fills one, verified against the
manifest like any fetch, and :meth:`drop` frees it again. The caller loads each
tensor just before the publisher encodes it and drops it right after
(:class:`wanrl_s3.io.source.StreamedSource`'s hooks), so one base tensor is
resident at a time.

The publisher copies the mapping at adoption and reads only the tensor it is
encoding; a value read before its :meth:`load` would be zeros. That is why the
loading is tied to the source's iteration, never left to the caller's memory.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import VerificationError
from ..format import dtypes
from ..io.pages import discard, scratch
from .subscriber import Subscriber, VerifiedOnLoad


class StreamedBase(VerifiedOnLoad):
    """The tensors of ``version`` from ``sub``'s store, each one loaded on request."""

    def __init__(self, sub: Subscriber, version: int) -> None:
        self.sub = sub
        self.plan = sub.plan(version)  # from its keyframe: nothing local is trusted
        self.manifest = self.plan.target
        self._arrays = {
            e.name: scratch(e.shape, dtypes.by_name(e.dtype).numpy) for e in self.manifest.tensors
        }
        self._loaded: set[str] = set()
        self.failed: str | None = None  # what did not verify; the caller publishes a keyframe

    @property
    def version(self) -> int:
        return self.manifest.version

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def load(self, name: str) -> None:
        """Fetch and verify tensor ``name`` into its array (a name the base lacks: nothing)."""
        if name not in self._arrays or name in self._loaded:
            return
        try:
            self.sub.fetch_tensor(self.plan, name, self._arrays[name])
        except VerificationError as exc:
            self.failed = f"tensor {name!r} of v{self.version}: {exc}"
            raise
        self._loaded.add(name)

    def drop(self, name: str) -> None:
        """Free tensor ``name``'s memory; it is not read again."""
        if name in self._loaded:
            discard(self._arrays[name])
            self._loaded.discard(name)
