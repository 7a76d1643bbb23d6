"""The file-likes the vendor SDKs download into: a bounded read never holds more than asked."""

from __future__ import annotations

import pytest

from wanrl_s3.store.sink import CappedSink


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
