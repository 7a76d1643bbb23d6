"""Reading and writing .safetensors files: no object deserialization, no torch, no copies.

The safetensors format: an 8-byte little-endian header length, a JSON header
mapping each name to ``dtype``, ``shape`` and ``data_offsets`` (plus an optional
``__metadata__`` of strings), then the tensors' bytes. We read through a memory
map (no copy until a tensor is used) and validate the header before touching
data, like the reference implementation. Writing preallocates the file so a
download can land straight in it, and goes through a temporary name renamed
into place only when everything verified, so no reader sees a half-written file.
"""

from __future__ import annotations

import errno
import itertools
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import LocalIOError, UsageError
from ..format import dtypes
from ..format.manifest import check_tensor
from ..units import MiB
from .pages import flush, map_file, release

FILE_MODE = 0o644  # what we write is a model for other processes (and users) to read

MAX_HEADER_BYTES = 100 * MiB
_ALIGN = 8


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * dtypes.by_name(self.dtype).itemsize


class SafetensorsFile:
    """A view of one .safetensors file; tensors are memory-mapped lazily.

    Read-only, or with ``copy_on_write`` writable in this process only (private
    pages, shared with the file until written).
    """

    def __init__(self, path: str | os.PathLike[str], *, copy_on_write: bool = False) -> None:
        self.path = Path(path)
        self._mode: Literal["c", "r"] = "c" if copy_on_write else "r"
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise UsageError(f"{self.path}: too short to be a .safetensors file")
                n = int.from_bytes(head, "little")
                if n > MAX_HEADER_BYTES or 8 + n > size:
                    raise UsageError(f"{self.path}: header length {n} is invalid")
                header = json.loads(f.read(n), object_pairs_hook=_unique_keys)
        except OSError as exc:
            raise UsageError(f"cannot read {self.path}: {exc.strerror}") from exc
        except _RepeatedKey as exc:
            raise UsageError(
                f"{self.path}: {exc} appears twice in the header; every key must be unique"
            ) from None
        except RecursionError:
            raise UsageError(f"{self.path}: the header nests too deep to be a header") from None
        except ValueError as exc:
            raise UsageError(f"{self.path}: header is not valid JSON: {exc}") from exc
        self.data_start = 8 + n
        self.metadata, self.specs, self._offsets = _parse_header(
            header, self.path, size - self.data_start
        )
        self._mmap: np.ndarray | None = None

    def _map(self) -> np.ndarray:
        """The data section, mapped once; read-only maps are shared, so their pages can be
        given back tensor by tensor (:func:`wanrl_s3.io.pages.release`)."""
        if self._mmap is None:
            whole = map_file(self.path, mode=self._mode)
            self._mmap = whole[self.data_start :] if whole.size else whole
        return self._mmap

    def array(self, name: str) -> np.ndarray:
        """The named tensor as a numpy array backed by the file."""
        spec = self.specs[name]
        start, end = self._offsets[name]
        dt = dtypes.by_name(spec.dtype)
        if end == start:
            return np.empty(spec.shape, dt.numpy)
        return self._map()[start:end].view(dt.numpy).reshape(spec.shape)

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        """``(name, array)`` of each tensor in the file's order, each backed by the file."""
        for name in self.specs:
            yield name, self.array(name)


def _parse_header(
    header: object, path: Path, data_bytes: int
) -> tuple[dict[str, str], dict[str, TensorSpec], dict[str, tuple[int, int]]]:
    if not isinstance(header, dict):
        raise UsageError(f"{path}: header must be a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise UsageError(f"{path}: __metadata__ must map strings to strings")
    specs: dict[str, TensorSpec] = {}
    offsets: dict[str, tuple[int, int]] = {}
    for name, info in header.items():
        try:
            dt = dtypes.by_name(_text(info["dtype"], "dtype"))
            shape = _ints(info["shape"], "shape")
            start, end = _ints(info["data_offsets"], "data_offsets", length=2)
        except UsageError as exc:
            raise UsageError(f"{path}: tensor {name!r}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path}: tensor {name!r} has a malformed entry: {exc}") from None
        if (
            any(d < 0 for d in shape)
            or not 0 <= start <= end <= data_bytes
            or end - start != math.prod(shape) * dt.itemsize
        ):
            raise UsageError(
                f"{path}: tensor {name!r}: data_offsets [{start}, {end}] do not "
                f"fit shape {list(shape)} of {dt.name} inside the file"
            )
        specs[name] = TensorSpec(name, dt.name, shape)
        offsets[name] = (start, end)
    spans = sorted(offsets.values())
    if any(a[1] > b[0] for a, b in itertools.pairwise(spans)):
        raise UsageError(f"{path}: tensors overlap")
    return metadata, specs, offsets


class _RepeatedKey(ValueError):
    """A key given twice in one JSON object of a header."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object, refused when a key repeats: a parser keeps only the last of them, so
    two tensors of one name would be one tensor here and maybe the other elsewhere."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(repr(key) if len(key) <= 64 else f"{key[:64]!r}...")
        out[key] = value
    return out


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {_shown(value)}")
    return value


def _ints(value: object, what: str, length: int | None = None) -> tuple[int, ...]:
    """A list of JSON integers, exactly: not a string of digits, a float or a boolean,
    which int() would quietly turn into other numbers."""
    if (
        not isinstance(value, list)
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in value)
        or (length is not None and len(value) != length)
    ):
        count = "a list of integers" if length is None else f"a list of {length} integers"
        raise TypeError(f"{what} must be {count}, got {_shown(value)}")
    return tuple(value)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 64 else f"{text[:64]}..."


def read_source(path: str | os.PathLike[str]) -> list[SafetensorsFile]:
    """A .safetensors file, or every .safetensors shard in a folder (sorted by name).

    The publisher's input: every tensor is checked against the manifest's limits
    here, before anything is uploaded.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.safetensors"))
        if not files:
            raise UsageError(f"{p} holds no .safetensors files")
    elif p.is_file():
        files = [p]
    else:
        raise UsageError(f"{p} does not exist")
    opened = [SafetensorsFile(f) for f in files]
    seen: dict[str, Path] = {}
    for f in opened:
        for name, spec in f.specs.items():
            try:
                check_tensor(name, spec.shape)
            except UsageError as exc:
                raise UsageError(f"{f.path}: {exc}") from exc
            if name in seen:
                raise UsageError(f"tensor {name!r} appears in both {seen[name]} and {f.path}")
            seen[name] = f.path
    return opened


def iter_source(files: Iterable[SafetensorsFile]) -> Iterator[tuple[str, np.ndarray]]:
    for f in files:
        yield from f.items()


class SafetensorsWriter:
    """Preallocates a .safetensors file for known specs; fill tensors, then commit.

    Data goes to ``<path>.tmp-*`` beside the target; :meth:`commit` flushes and
    renames it into place; :meth:`abort` (or leaving the ``with`` block on an
    error) deletes it, so the target is either the old file or the whole new one.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        specs: Iterable[TensorSpec],
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.specs = {s.name: s for s in specs}
        header: dict[str, object] = {}
        if metadata:
            header["__metadata__"] = dict(metadata)
        self._offsets: dict[str, tuple[int, int]] = {}
        pos = 0
        for s in self.specs.values():
            header[s.name] = {
                "dtype": s.dtype,
                "shape": list(s.shape),
                "data_offsets": [pos, pos + s.nbytes],
            }
            self._offsets[s.name] = (pos, pos + s.nbytes)
            pos += s.nbytes
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % _ALIGN)  # keep data 8-byte aligned, as safetensors does
        self.data_start = 8 + len(blob)
        self.total_bytes = self.data_start + pos
        self._tmp = _preallocated_tmp(path, len(blob).to_bytes(8, "little") + blob, pos)
        try:
            self._mmap = map_file(self._tmp, mode="r+")[self.data_start :]
        except LocalIOError:
            self._tmp.unlink(missing_ok=True)
            raise

    def array(self, name: str) -> np.ndarray:
        """A writable array for the named tensor, backed by the file."""
        spec = self.specs[name]
        start, end = self._offsets[name]
        dt = dtypes.by_name(spec.dtype)
        if start == end:
            return np.empty(spec.shape, dt.numpy)
        return self._mmap[start:end].view(dt.numpy).reshape(spec.shape)

    def commit(self, *, durable: bool = False) -> Path:
        """Rename the finished file into place.

        Other processes see the old file or the whole new one either way. With
        ``durable`` the data is also flushed to disk first (msync), so it survives
        a power cut; that costs ~0.3 s per GB here, and readers verify hashes
        anyway (a worker re-verifies its file when it starts), so it is opt-in.
        """
        try:
            if durable:
                flush(self._mmap)
            self._mmap = np.empty(0, np.uint8)
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self.abort()
            raise LocalIOError.wrap(f"cannot write {self.path}", exc) from exc
        return self.path

    def abort(self) -> None:
        self._mmap = np.empty(0, np.uint8)
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> SafetensorsWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            self.abort()


def _preallocated_tmp(target: str | os.PathLike[str], head: bytes, data_bytes: int) -> Path:
    """A temporary file beside ``target`` holding ``head`` and ``data_bytes`` reserved blocks.

    The blocks are allocated for real (``posix_fallocate``), not left sparse: a
    sparse file that is memory-mapped and then filled on a full disk kills the
    process with SIGBUS, nothing printed and the temporary file left behind.
    Reserving first turns a full disk, a quota, a read-only file system or a
    missing permission into a :class:`LocalIOError` here, before any download.
    """
    path = _check_target(target)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    except OSError as exc:
        raise LocalIOError.wrap(f"cannot create a file in {path.parent}", exc) from exc
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would hide it from a server run as another user
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            f.flush()
            _reserve(f.fileno(), len(head), data_bytes)
    except OSError as exc:
        os.unlink(name)
        raise LocalIOError.wrap(
            f"cannot write {path} ({len(head) + data_bytes:,} bytes)", exc
        ) from exc
    return Path(name)


def _check_target(target: str | os.PathLike[str]) -> Path:
    """The output path, refused early when it cannot name a file (empty, a directory)."""
    if not os.fspath(target):
        raise UsageError("the output file name is empty")
    path = Path(target)
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory, give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: {path.parent} is not a directory")
    return path


def _reserve(fd: int, offset: int, length: int) -> None:
    """Allocate ``length`` bytes at ``offset``: posix_fallocate, else zeros written out.

    Some file systems (and platforms without posix_fallocate) refuse the call;
    writing zeros is slower but allocates just as surely.
    """
    if length == 0:
        return
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, offset, length)
            return
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
    zeros = bytes(MiB)
    os.lseek(fd, offset, os.SEEK_SET)
    done = 0
    while done < length:
        done += os.write(fd, zeros[: min(MiB, length - done)])


def write_file(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write numpy arrays as a .safetensors file (atomically), one tensor resident at a time
    when they come from files too (each tensor's pages are released once copied)."""
    specs = [
        TensorSpec(n, dtypes.of_numpy(a.dtype).name, tuple(a.shape)) for n, a in tensors.items()
    ]
    with SafetensorsWriter(path, specs, metadata) as w:
        for name, arr in tensors.items():
            out = w.array(name)
            out[...] = arr
            release(out)  # written to the file: its pages need not stay in this process
            release(arr)
        return w.commit()
