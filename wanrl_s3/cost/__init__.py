"""The planner: pure functions that size a rollout fleet and price its broadcast.

Nothing here touches the network. Units are in the names: ``_s`` seconds,
``_mbps`` megabits per second, ``_gb`` decimal gigabytes, ``_usd`` US dollars.
The formulas follow the reference page on policy dissemination and reproduce
its printed figures (see ``tests/cost``).

``__all__`` is what a user of the planner calls: the plan (:func:`estimate`), the
fleet file and its per-worker broadcast times, the CDN and request terms, the
learner's idle share and a mixed pool's cheapest activation, with the types they
take and return. The formulas beneath them stay in the private modules.
"""

from __future__ import annotations

from .cdn import cdn_download_traffic, cdn_read_s
from .egress import Traffic, month_usd
from .fleet import (
    FetchModel,
    FleetLinks,
    WorkerLink,
    at_fraction_s,
    chain_layout,
    chain_worker_times_s,
    object_storage_fleet_s,
    object_storage_worker_s,
    object_storage_worker_terms,
)
from .fleet_file import fleet_to_csv, parse_fleet
from .gpu import Activation, WorkerOffer, activate_cheapest
from .inputs import PlanInputs
from .learner import LearnerIdle, learner_idle
from .plan import Plan, TopologyEstimate, estimate, evaluate
from .prices import PriceBook, load_prices
from .publication import TrainerUplink
from .requests import ReadRates, payload_prefixes_fit, read_rates

__all__ = [
    "Activation",
    "FetchModel",
    "FleetLinks",
    "LearnerIdle",
    "Plan",
    "PlanInputs",
    "PriceBook",
    "ReadRates",
    "TopologyEstimate",
    "Traffic",
    "TrainerUplink",
    "WorkerLink",
    "WorkerOffer",
    "activate_cheapest",
    "at_fraction_s",
    "cdn_download_traffic",
    "cdn_read_s",
    "chain_layout",
    "chain_worker_times_s",
    "estimate",
    "evaluate",
    "fleet_to_csv",
    "learner_idle",
    "load_prices",
    "month_usd",
    "object_storage_fleet_s",
    "object_storage_worker_s",
    "object_storage_worker_terms",
    "parse_fleet",
    "payload_prefixes_fit",
    "read_rates",
]


def __dir__() -> list[str]:
    return sorted(__all__)  # the public names only, not the submodules
