"""What a worker's install line says about the bytes it downloaded."""

from __future__ import annotations

from wanrl_s3.fetch.watch import describe_source


def test_a_small_download_is_counted_in_kib_not_as_zero_mib() -> None:
    assert describe_source((7,), 27_000) == "downloaded 26.4 KiB (the payload of v7)"
    assert describe_source((5, 6), 3 * 2**20) == "downloaded 3.0 MiB (the payloads of v5, v6)"
    assert describe_source((), 0).startswith("nothing downloaded")
