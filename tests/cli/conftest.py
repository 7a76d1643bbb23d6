"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["file", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test against a file:// store and an s3:// bucket on the SeaweedFS server."""
    if request.param == "file":
        return f"file://{tmp_path}/bucket/run"
    return request.getfixturevalue("s3_url")
