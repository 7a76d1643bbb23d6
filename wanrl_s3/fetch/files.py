"""Snapshots as .safetensors files: the pull target and the ``--have`` base.

A pulled file records in its safetensors metadata which version and run it
holds, so a later ``pull --have FILE`` can download only the deltas after it.
The file is written beside its final name and renamed into place only after
every tensor verified; a failed pull leaves the old file, if any, untouched.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping

from ..errors import UsageError
from ..format import layout
from ..io.safetensors_file import SafetensorsFile, SafetensorsWriter, TensorSpec
from .subscriber import Snapshot, Subscriber

VERSION_KEY = "wanrl_s3.version"
RUN_ID_KEY = "wanrl_s3.run_id"


def load_snapshot(path: str | os.PathLike[str], *, copy_on_write: bool = False) -> Snapshot:
    """A file written by :func:`pull_to_file`, memory-mapped, as a Snapshot.

    The tensors are read-only, or with ``copy_on_write`` writable without changing
    the file (pages are shared with the file until written).
    """
    f = SafetensorsFile(path, copy_on_write=copy_on_write)
    version = recorded_version(f.metadata)
    if version is None:
        raise UsageError(
            f"{path} does not record which version it holds (no {VERSION_KEY!r} "
            "metadata of a version number); use a file written by `wanrl-s3 pull`, or drop --have"
        )
    return Snapshot(version, dict(f.items()))


def recorded_version(metadata: Mapping[str, str]) -> int | None:
    """The version a file's metadata records (as :func:`pull_to_file` writes it), or None.

    Only ASCII digits of a version in range count: ``str.isdigit`` also takes
    '²' and '١', which ``int()`` refuses or reads as another number. A file
    whose metadata is anything else records no version.
    """
    raw = metadata.get(VERSION_KEY)
    if raw is None or not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        return None
    version = int(raw)
    return version if version <= layout.MAX_VERSION else None


def local_snapshot(
    path: str | os.PathLike[str], sub: Subscriber, *, copy_on_write: bool = False
) -> Snapshot | None:
    """A local .safetensors file as a Snapshot of the version it holds, or None.

    A file written by :func:`pull_to_file` says its version; any other file (the
    trainer's own checkpoint) is identified by its tensors' hashes against the
    manifests (:meth:`Subscriber.identify`). None when it holds no published version.
    """
    f = SafetensorsFile(path, copy_on_write=copy_on_write)
    tensors = dict(f.items())
    version = recorded_version(f.metadata)
    if version is not None:
        return Snapshot(version, tensors)
    version = sub.identify(tensors)
    return None if version is None else Snapshot(version, tensors)


def pull_to_file(
    sub: Subscriber,
    path: str | os.PathLike[str],
    version: int | str | None = None,
    *,
    have: Snapshot | None = None,
    progress: Callable[[int], None] | None = None,
    durable: bool = False,
    cancel: threading.Event | None = None,
) -> Snapshot:
    """Download, verify and write ``version`` as a .safetensors file, atomically.

    ``durable`` also flushes it to disk before the rename (see SafetensorsWriter.commit).
    """
    target = sub.manifest(sub.resolve(version))
    specs = [TensorSpec(t.name, t.dtype, t.shape) for t in target.tensors]
    metadata = {VERSION_KEY: str(target.version), RUN_ID_KEY: target.run_id}
    with SafetensorsWriter(path, specs, metadata) as writer:
        snap = sub.fetch(
            target.version,
            have=have,
            alloc=lambda e: writer.array(e.name),
            progress=progress,
            cancel=cancel,
        )
        writer.commit(durable=durable)
    return snap
