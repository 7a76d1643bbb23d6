"""Giving pages back: file data survives a release, scratch memory is freed, writes are kept.

Resident sizes are read from /proc/self/smaps_rollup, before and after, for
16 MiB regions (far above anything else this test's threads allocate).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wanrl_s3.io.pages import discard, file_span, map_file, release, scratch
from wanrl_s3.io.safetensors_file import SafetensorsFile, write_file

MiB = 2**20


def resident() -> tuple[int, int]:
    """(Rss, Anonymous) of this process, bytes."""
    fields = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key] = int(value.split()[0]) * 1024
    return fields["Rss"], fields["Anonymous"]


def test_a_released_file_tensor_leaves_the_process_and_reads_back_the_same(
    tmp_path: Path,
) -> None:
    data = np.random.default_rng(0).integers(0, 255, 16 * MiB, np.uint8)
    path = write_file(tmp_path / "f.safetensors", {"a": data, "b": np.arange(7, dtype=np.int32)})
    arr = SafetensorsFile(path).array("a")
    assert int(arr.sum(dtype=np.int64)) == int(data.sum(dtype=np.int64))  # every page touched
    before, _ = resident()
    assert release(arr) >= 16 * MiB
    after, _ = resident()
    assert before - after >= 15 * MiB
    assert np.array_equal(arr, data)  # read back from the file
    assert SafetensorsFile(path).array("b").tolist() == list(range(7))


def test_released_pages_of_a_file_being_written_keep_their_data(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(bytes(16 * MiB))
    flat = map_file(path, mode="r+")
    flat[:] = 7
    release(flat[: 8 * MiB + 100])  # widened to whole pages: neighbours keep their bytes
    assert int(flat[8 * MiB + 100 : 8 * MiB + 5000].min()) == 7
    del flat
    assert set(path.read_bytes()[: 9 * MiB]) == {7}


def test_scratch_holds_nothing_until_written_and_discard_frees_it() -> None:
    _, anon0 = resident()
    buf = scratch((32 * MiB,), np.uint8)
    _, anon1 = resident()
    assert anon1 - anon0 < MiB
    buf[:] = 1
    _, anon2 = resident()
    assert anon2 - anon1 >= 31 * MiB
    assert discard(buf[1000:]) >= 31 * MiB  # narrowed: the first page is kept
    _, anon3 = resident()
    assert anon2 - anon3 >= 31 * MiB
    assert buf[:1000].tolist() == [1] * 1000 and int(buf[8192:].max()) == 0
    assert release(buf) == 0 and discard(np.ones(10)) == 0  # not theirs to touch


def test_a_private_map_keeps_what_was_written_through_it(tmp_path: Path) -> None:
    path = tmp_path / "p.bin"
    path.write_bytes(bytes(range(256)) * (16 * MiB // 256))
    flat = map_file(path, mode="c")
    flat[:4096] = 9  # a private page: exists nowhere else
    release(flat)
    assert int(flat[:4096].min()) == 9 and flat[5000] == 5000 % 256
    assert path.read_bytes()[:3] == bytes([0, 1, 2])  # the file never changed


def test_a_writable_file_map_says_where_its_bytes_are_in_the_file(tmp_path: Path) -> None:
    """What lets a download write through the file instead of the map (store/sink.py)."""
    import os

    path = tmp_path / "f.bin"
    path.write_bytes(bytes(3 * MiB))
    arr = map_file(path, mode="r+")
    view = memoryview(arr[MiB + 5 : 2 * MiB])
    span = file_span(view)
    assert span is not None and span[1] == MiB + 5
    os.pwrite(span[0], b"written through the file", span[1])
    assert bytes(view[:24]) == b"written through the file"  # the map shows the same pages
    assert path.read_bytes()[MiB + 5 : MiB + 29] == b"written through the file"


def test_only_a_writable_shared_file_map_has_a_file_span(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(MiB))
    for other in (
        map_file(path, mode="r"),  # read-only: writing to it would be a bug
        map_file(path, mode="c"),  # copy-on-write: writing must not change the file
        scratch((MiB,), np.uint8),
        np.zeros(MiB, np.uint8),
    ):
        assert file_span(memoryview(other)) is None
    assert file_span(memoryview(bytearray(10))) is None
