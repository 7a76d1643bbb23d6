"""return_big_buffers: glibc maps big allocations on their own, so freeing returns them.

Each case runs in a fresh interpreter (the setting is process-wide). glibc's
``mallinfo2`` says whether a 2 MiB buffer was mapped on its own (``hblkhd``, bytes
in such maps) or carved from a heap that keeps it after free. Without the setting,
freeing one 16 MiB block first raises glibc's threshold above 2 MiB, as the
download threads' freed response bodies do in a pull.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

CASE = r"""
import ctypes, sys
from wanrl_s3 import return_big_buffers

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
if sys.argv[1] == "on":
    assert return_big_buffers() is True
big = bytearray(16 << 20)
del big  # glibc raises its mmap threshold to 16 MiB here, unless told otherwise
before = libc.mallinfo2().hblkhd
buf = bytearray(2 << 20)
print(libc.mallinfo2().hblkhd - before)
"""


def mapped_bytes_of_a_2_mib_buffer(setting: str) -> int:
    out = subprocess.run([sys.executable, "-c", CASE, setting], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="not glibc 2.33 or later")
def test_big_buffers_are_mapped_on_their_own_only_when_asked() -> None:
    assert mapped_bytes_of_a_2_mib_buffer("on") >= 2 << 20
    assert mapped_bytes_of_a_2_mib_buffer("off") == 0
