"""Memory maps whose pages a reader or writer lets go of once it is done with a tensor.

Every byte a process touches through a memory map stays in its resident set
until the map goes away: a pull that writes a 1 GiB file through a map ends
with 1 GiB resident, a ``pull --have`` that also reads the old file ends with
2 GiB, although neither needs more than the tensor it is working on. The maps
made here can give pages back, tensor by tensor:

- a *shared file map* (a file read, or written in place), :func:`release`: the
  pages leave this process but the data stays in the file and the page cache;
  touching the array again reads it back (a minor fault while it is cached);
- a *scratch map* (private anonymous memory from :func:`scratch`), :func:`discard`:
  nothing is resident until written, and a discarded range is freed (zeros after).

- a *private file map* (copy-on-write), :func:`release` too, but gently
  (``MADV_PAGEOUT``): pages still as in the file are reclaimed, pages written
  through the map are kept (without swap they cannot go anywhere), so nothing
  written is ever lost. Kernels before 5.4 refuse the advice: nothing happens.

A writable shared file map also says where its bytes live in the file
(:func:`file_span`), so that bytes from a socket go into the file with
``pwrite`` rather than through the map: the first write to a page of a map
makes the kernel read or zero the whole page before the bytes land, a second
pass over every byte; ``pwrite`` of whole pages skips it. A 1 GiB socket read
into a map cost 0.7-2.4 s of system time here, into a 1 MiB buffer then
``pwrite`` 0.33-0.41 s (docs/results/store-speed-2026-12-05b.md).
"""

from __future__ import annotations

import mmap
import os
import weakref
from typing import Any

import numpy as np

from ..errors import LocalIOError

PAGE_BYTES = mmap.PAGESIZE
MADV_PAGEOUT = getattr(mmap, "MADV_PAGEOUT", 21)  # linux/mman.h; Python 3.11 lacks the name


class _Map(mmap.mmap):
    """A map that knows what releasing its pages means: ``kind`` is "shared" (a file,
    data kept), "private" (copy-on-write: never released) or "scratch" (freed)."""

    kind: str
    address: int
    fd: int = -1  # a writable shared file map: its own descriptor of the file (file_span)


def map_file(path: str | os.PathLike[str], *, mode: str) -> np.ndarray:
    """The whole file as a flat uint8 array: ``r`` (shared, read-only), ``r+`` (shared,
    writable) or ``c`` (private copy-on-write). An empty file maps to an empty array."""
    access = {"r": mmap.ACCESS_READ, "r+": mmap.ACCESS_WRITE, "c": mmap.ACCESS_COPY}[mode]
    try:
        with open(path, "r+b" if mode == "r+" else "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return np.empty(0, np.uint8)
            mm = _Map(f.fileno(), size, access=access)
            if mode == "r+":
                mm.fd = os.dup(f.fileno())
                weakref.finalize(mm, os.close, mm.fd)  # closed with the map's last array
    except OSError as exc:
        raise LocalIOError.wrap(f"cannot map {path}", exc) from exc
    mm.kind = "private" if mode == "c" else "shared"
    return _array(mm)


def file_span(view: memoryview) -> tuple[int, int] | None:
    """(file descriptor, offset in the file) of the bytes ``view`` covers, where ``view``
    lies in a writable shared file map (:func:`map_file` ``r+``); None for any other
    memory. Writing there with ``os.pwrite`` changes the same pages the map shows."""
    obj: Any = view.obj
    mm = _root(obj) if isinstance(obj, np.ndarray) else obj if isinstance(obj, _Map) else None
    if mm is None or mm.fd < 0 or mm.closed or view.nbytes == 0 or not view.contiguous:
        return None
    start = np.frombuffer(view.cast("B"), np.uint8).ctypes.data - mm.address
    if start < 0 or start + view.nbytes > len(mm):
        return None
    return mm.fd, start


def scratch(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array over fresh private anonymous memory: no page is resident until written."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if nbytes == 0:
        return np.empty(shape, dt)
    mm = _Map(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mm.kind = "scratch"
    return _array(mm)[:nbytes].view(dt).reshape(shape)


def _array(mm: _Map) -> np.ndarray:
    flat = np.frombuffer(mm, np.uint8)
    mm.address = flat.ctypes.data
    return flat


def _root(arr: np.ndarray) -> _Map | None:
    obj: Any = arr
    while isinstance(obj, np.ndarray):
        obj = obj.base
    if isinstance(obj, memoryview):
        obj = obj.obj
    return obj if isinstance(obj, _Map) else None


def release(arr: np.ndarray) -> int:
    """Give back the pages of the file map behind ``arr``; the bytes advised.

    The range is widened to whole pages: their data stays in the file (or, for
    a page written through a private map, where it is), so a neighbouring
    tensor loses nothing and reads it back when touched. Anything else
    (scratch, ordinary arrays) is left alone: 0.
    """
    mm = _root(arr)
    if mm is None or mm.kind == "scratch" or mm.closed or arr.nbytes == 0:
        return 0
    start = arr.ctypes.data - mm.address
    lo, hi = start - start % PAGE_BYTES, -(-(start + arr.nbytes) // PAGE_BYTES) * PAGE_BYTES
    if mm.kind == "shared":
        return _advise(mm, lo, hi, mmap.MADV_DONTNEED)
    try:
        return _advise(mm, lo, hi, MADV_PAGEOUT)
    except OSError:  # a kernel without MADV_PAGEOUT: the pages stay, which is only memory
        return 0


def discard(arr: np.ndarray) -> int:
    """Free the scratch pages only ``arr`` covers (see :func:`scratch`); the bytes freed.

    Their contents are gone (they read as zeros after): call it when done with
    them. The range is narrowed to whole pages so a neighbour keeps its bytes.
    Anything not scratch is left alone: 0.
    """
    mm = _root(arr)
    if mm is None or mm.kind != "scratch" or mm.closed or arr.nbytes == 0:
        return 0
    start = arr.ctypes.data - mm.address
    end = start + arr.nbytes
    hi = end if end == len(mm) else end - end % PAGE_BYTES
    return _advise(mm, -(-start // PAGE_BYTES) * PAGE_BYTES, hi, mmap.MADV_DONTNEED)


def _advise(mm: _Map, lo: int, hi: int, advice: int) -> int:
    hi = min(hi, len(mm))
    if hi <= lo:
        return 0
    mm.madvise(advice, lo, hi - lo)
    return hi - lo


def flush(arr: np.ndarray) -> None:
    """Write a shared file map's dirty pages to disk (msync); other arrays: nothing to do."""
    mm = _root(arr)
    if mm is not None and mm.kind == "shared" and not mm.closed:
        mm.flush()
