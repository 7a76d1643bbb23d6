"""A real nginx edge for the read-path tests (tests/cdn, tests/cli), or a skip naming the fix."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.testing import CdnEdge, local_cdn_edge
from wanrl_s3.testing.cdn_edge import nginx_binary


@contextmanager
def nginx_edge(origin_url: str, **options: Any) -> Iterator[CdnEdge]:
    """``local_cdn_edge(origin_url, **options)``; the test is skipped where nginx is missing."""
    try:
        nginx_binary()
    except UsageError as exc:
        pytest.skip(str(exc))
    with local_cdn_edge(origin_url, **options) as edge:
        yield edge
