"""What the vendor SDKs download into: a ranged GET's answer is used only when it holds
the bytes asked for, a bounded read never holds more than asked, and a body for a
file's map goes into the file through pwrite, in whole chunks."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from wanrl_s3.errors import LocalIOError, StoreError
from wanrl_s3.io.pages import map_file
from wanrl_s3.store import sink
from wanrl_s3.store.sink import CappedSink, StreamBroke, ranged_response, read_socket_into

MiB = 2**20


class Answer:
    """The parts of a requests or azure-core response that ranged_response reads."""

    def __init__(self, status_code: int, content_range: str = "", length: int = 0) -> None:
        self.status_code = status_code
        self.headers = {"content-range": content_range, "content-length": str(length)}
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Refused(Exception):
    pass


def _refuse(response: Answer) -> Exception:
    return Refused(response.status_code)


def test_the_range_asked_for_is_used() -> None:
    answer = Answer(206, "bytes 100-199/1000", 100)
    assert ranged_response(answer, 100, 100, "s://b", _refuse) is answer
    assert not answer.closed


def test_a_range_cut_short_by_the_end_of_the_object_is_used() -> None:
    answer = Answer(206, "bytes 900-999/1000", 100)  # asked for 200: the caller checks the size
    assert ranged_response(answer, 900, 200, "s://b", _refuse) is answer


def test_past_the_end_is_none() -> None:
    answer = Answer(416)
    assert ranged_response(answer, 5000, 100, "s://b", _refuse) is None
    assert answer.closed


@pytest.mark.parametrize(
    ("content_range", "length"),
    [("bytes 0-99/1000", 100), ("bytes 100-299/1000", 200), ("", 100)],
    ids=["another start", "more than asked", "no range at all"],
)
def test_another_range_is_refused(content_range: str, length: int) -> None:
    answer = Answer(206, content_range, length)
    with pytest.raises(StoreError, match="asked for 100 bytes from 100"):
        ranged_response(answer, 100, 100, "s://b", _refuse)
    assert answer.closed  # never back in the pool with a body unread


@pytest.mark.parametrize("status", [200, 403, 404, 503])
def test_any_other_status_is_the_sdks_error(status: int) -> None:
    with pytest.raises(Refused):
        ranged_response(Answer(status), 0, 100, "s://b", _refuse)


def test_a_capped_sink_keeps_the_first_bytes_and_stops_a_download_that_sends_more() -> None:
    sink = CappedSink(10)
    assert sink.write(b"0123") == 4 and sink.write(memoryview(b"456789")) == 6  # exactly full
    with pytest.raises(CappedSink.Full):
        sink.write(b"x" * 1_000_000)  # a server that ignored the range
    assert bytes(sink.data) == b"0123456789" and sink.tell() == 10


def test_a_capped_sink_takes_less_than_its_cap() -> None:
    sink = CappedSink(10)
    sink.write(b"short")
    assert bytes(sink.data) == b"short"


class Body:
    """A urllib3 response over http.client, as read_socket_into reads it: ``_fp.readinto``
    hands out at most ``piece`` bytes at a time, and fails after ``fail_after`` bytes."""

    def __init__(self, data: bytes, piece: int, fail_after: int | None = None) -> None:
        self._fp = self
        self.data, self.pos, self.piece, self.fail_after = data, 0, piece, fail_after
        self.dropped = self.released = False

    def readinto(self, buf: memoryview) -> int:
        if self.fail_after is not None and self.pos >= self.fail_after:
            raise ConnectionResetError("reset by peer")
        n = min(len(buf), self.piece, len(self.data) - self.pos)
        buf[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n

    def isclosed(self) -> bool:
        return self.pos == len(self.data)

    def release_conn(self) -> None:
        self.released = True

    def close(self) -> None:
        self.dropped = True


@pytest.fixture
def output(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A pull's output: a 4 MiB file, mapped writable."""
    path = tmp_path / "out.bin"
    path.write_bytes(bytes(4 * MiB))
    return path, map_file(path, mode="r+")


def test_a_body_for_a_file_map_is_written_through_the_file_in_whole_chunks(
    output: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, arr = output
    data = os.urandom(2 * MiB + 12345)
    writes: list[tuple[int, int]] = []
    real_pwrite = os.pwrite

    def pwrite(fd: int, buf: memoryview, offset: int) -> int:
        writes.append((offset, len(buf)))
        return real_pwrite(fd, buf, offset)

    monkeypatch.setattr(sink.os, "pwrite", pwrite)
    body = Body(data, piece=100_000)  # a socket hands out less than asked
    assert read_socket_into(body, memoryview(arr[100 : 100 + len(data)])) == len(data)
    assert writes == [(100, MiB), (100 + MiB, MiB), (100 + 2 * MiB, 12345)]
    assert path.read_bytes()[100 : 100 + len(data)] == data
    assert body.released and not body.dropped


def test_a_broken_body_keeps_what_reached_the_file(output: tuple[Path, np.ndarray]) -> None:
    path, arr = output
    data = os.urandom(2 * MiB)
    with pytest.raises(StreamBroke) as broke:
        read_socket_into(Body(data, piece=MiB // 2, fail_after=MiB + MiB // 2), memoryview(arr))
    assert broke.value.done == MiB  # the half chunk gathered was never written: resumed from here
    assert path.read_bytes()[:MiB] == data[:MiB]


def test_a_failed_write_to_the_output_is_a_local_error_not_a_broken_stream(
    output: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk error is not retried as a dropped connection: the caller sees LocalIOError."""
    _, arr = output

    def failing(fd: int, buf: memoryview, offset: int) -> int:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(sink.os, "pwrite", failing)
    body = Body(os.urandom(MiB), piece=MiB)
    with pytest.raises(LocalIOError) as err:
        read_socket_into(body, memoryview(arr[:MiB]))
    assert err.value.errno == errno.EIO
    assert body.dropped  # the rest of the body is never read from that connection


def test_a_body_for_ordinary_memory_lands_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pwrite(*_: object) -> int:
        raise AssertionError("ordinary memory is not a file")

    monkeypatch.setattr(sink.os, "pwrite", no_pwrite)
    data = os.urandom(MiB + 7)
    buf = bytearray(len(data))
    assert read_socket_into(Body(data, piece=4096), memoryview(buf)) == len(data)
    assert bytes(buf) == data
