"""Fixtures for the verl adapter's tests: the real verl package on CPU, one Ray session.

Ray starts once per test session (several seconds) and every test that needs it
shares it; its workers get the S3 server's placeholder credentials explicitly.
Without verl (``pip install 'wanrl-s3[verl]'``) this directory is skipped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from wanrl_s3.testing import CREDENTIALS

HAVE_VERL = importlib.util.find_spec("verl") is not None
collect_ignore_glob = [] if HAVE_VERL else ["test_*.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integrations/verl" in str(item.path):
            item.add_marker(pytest.mark.verl)


@pytest.fixture(scope="session")
def ray_session(s3_endpoint: str) -> Iterator[Any]:
    """A local Ray cluster for the whole session; logical CPUs, so small actors all fit."""
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=8,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {**CREDENTIALS, "TOKENIZERS_PARALLELISM": "false"}},
            logging_level="ERROR",
        )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def transfer_queue(ray_session: Any) -> Iterator[Any]:
    """verl's TransferQueue on the shared Ray session (one in-memory storage unit)."""
    import transfer_queue as tq
    from omegaconf import OmegaConf

    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()


@pytest.fixture
def engine_kwargs(s3_url: str, s3_endpoint: str) -> dict[str, Any]:
    """``engine_kwargs.wanrl_s3`` for a fresh bucket on the SeaweedFS server, polling fast."""
    return {
        "store_url": s3_url,
        "endpoint_url": s3_endpoint,
        "poll_interval_s": 0.2,
        "wait_for_first_s": 60.0,
    }
