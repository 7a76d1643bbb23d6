"""The publisher's input, one tensor resident at a time.

``wanrl-s3 publish`` reads its tensors from .safetensors files through shared
memory maps. Read whole, every page of the source would stay in the
publisher's resident set until it exits (1x the snapshot on top of the upload
buffers). :class:`StreamedSource` is the mapping the publisher reads instead:
iterating its items gives each tensor's pages back as soon as the consumer
asks for the next one, by which time the publisher has encoded it and copied
it into its upload parts. Hooks around each item let a lazily fetched delta
base (:class:`wanrl_s3.fetch.streamed_base.StreamedBase`) bring in and drop
the matching base tensor at the same pace.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping

import numpy as np

from .pages import release
from .safetensors_file import SafetensorsFile

Hook = Callable[[str], None]


class StreamedSource(Mapping[str, np.ndarray]):
    """name -> tensor of ``files``, mapped lazily; ``items()`` releases each tensor after use.

    ``before(name)`` runs before a tensor is handed out, ``after(name)`` once the
    consumer has moved past it. Plain lookups (``source[name]``) release nothing:
    a consumer that reads the mapping again (the publisher's keyframe fallback)
    gets every tensor, at the cost of keeping their pages until it is done.
    """

    def __init__(
        self,
        files: Iterable[SafetensorsFile],
        *,
        before: Hook | None = None,
        after: Hook | None = None,
    ) -> None:
        self._where = {name: f for f in files for name in f.specs}
        self.before, self.after = before, after

    def __getitem__(self, name: str) -> np.ndarray:
        return self._where[name].array(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def items(self) -> ItemsView[str, np.ndarray]:
        return _StreamedItems(self)

    def stream(self) -> Iterator[tuple[str, np.ndarray]]:
        for name in self._where:
            if self.before is not None:
                self.before(name)
            arr = self[name]
            yield name, arr
            release(arr)
            if self.after is not None:
                self.after(name)


class _StreamedItems(ItemsView[str, np.ndarray]):
    _mapping: StreamedSource

    def __iter__(self) -> Iterator[tuple[str, np.ndarray]]:
        return self._mapping.stream()
