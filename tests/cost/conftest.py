"""Shared fixtures for the planner tests: the shipped prices and the 8B operating point."""

from __future__ import annotations

import pytest

from wanrl_s3.cost.inputs import PlanInputs
from wanrl_s3.cost.prices import PriceBook, load_prices

from .operating_point import BATCH, PARAMS_8B, T_TRAIN_S


@pytest.fixture(scope="session")
def prices() -> PriceBook:
    return load_prices()


@pytest.fixture
def inputs_8b() -> PlanInputs:
    """The page's operating point with the CLI's defaults for everything it does not fix.

    The page ships full snapshots raw, so its figures need ``full_ratio=1``.
    """
    return PlanInputs(params=PARAMS_8B, t_train_s=T_TRAIN_S, batch=BATCH, full_ratio=1.0)
