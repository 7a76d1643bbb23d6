"""Fixtures for the Terraform checks. Each one skips, saying why, when its tool
is missing, so the suite still runs on a machine without terraform, without a
local AWS provider plugin or without the checkov venv."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tf_support

from wanrl_s3.testing import local_moto


@pytest.fixture(scope="session")
def terraform_path() -> str:
    """The terraform executable; skips the test where there is none."""
    path = tf_support.terraform_bin()
    if path is None:
        pytest.skip("terraform is not on PATH: fmt/validate/plan checks skipped")
    return path


@pytest.fixture(scope="session")
def aws_plugin_dir(terraform_path: str) -> Path:
    """A local directory with the hashicorp/aws 5.x provider; skips without one,
    since providers cannot be downloaded here."""
    found = tf_support.aws_plugin_dir()
    if found is None:
        tried = ", ".join(c for c in tf_support.PLUGIN_DIR_CANDIDATES if c)
        pytest.skip(
            "no local hashicorp/aws 5.x provider plugin (looked in "
            f"{tried}; set WANRL_TF_PLUGIN_DIR): terraform validate/plan skipped, "
            "the registry is unreachable offline"
        )
    return found


@pytest.fixture(scope="module")
def terraform_moto_endpoint() -> Iterator[str]:
    """A moto server on 127.0.0.1 that stands in for STS, IAM and S3 when
    terraform plans or applies; one per test module, stopped afterwards."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    with local_moto() as endpoint:
        yield endpoint
