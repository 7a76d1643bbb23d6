"""The planner: pure functions that size a rollout fleet and price its broadcast.

Nothing here touches the network. Units are in the names: ``_s`` seconds,
``_mbps`` megabits per second, ``_gb`` decimal gigabytes, ``_usd`` US dollars.
The formulas follow the reference page on policy dissemination and reproduce
its printed figures (see ``tests/cost``).
"""

from __future__ import annotations

from .capacity import (
    StalenessBudget,
    bubble_ratio,
    is_feasible,
    min_feasible_kappa,
    require_dropped_fraction,
    required_pool_rollouts_per_s,
    slack_s,
    staleness_budget,
    step_s_at_pool,
    usable_rollouts_per_s,
    workers_needed,
)
from .cdn import DEFAULT_EDGES, FILL_ROUND_TRIPS, cdn_download_traffic, cdn_fill_s, origin_fetches
from .egress import (
    RunPricing,
    Traffic,
    effective_usd_per_gb,
    month_usd,
    requests_usd,
    run_rates,
    storage_usd,
    tiered_usd,
    transfer_usd,
)
from .fleet import (
    FetchModel,
    FleetLinks,
    WorkerLink,
    at_fraction_s,
    chain_fleet_s,
    chain_layout,
    chain_worker_times_s,
    object_storage_fleet_s,
    object_storage_worker_s,
    object_storage_worker_terms,
    star_fleet_s,
)
from .fleet_file import fleet_to_csv, parse_fleet
from .freshness import STALE_AFTER_MONTHS, is_stale, stale_entries, stale_warning
from .gpu import (
    Activation,
    WorkerOffer,
    activate_cheapest,
    break_even_step_s,
    break_even_workers,
    cost_per_step_usd,
    hourly_usd,
    saving_fraction,
)
from .inputs import TOPOLOGIES, PlanInputs
from .learner import LearnerIdle, learner_idle
from .model_size import params_from_hf_config
from .plan import Plan, TopologyEstimate, estimate, evaluate
from .prices import (
    CdnPrices,
    PriceBook,
    Provenance,
    RequestLimits,
    StoragePrices,
    load_prices,
    parse_prices,
)
from .publication import TYPICAL_FULL_RATIO, TrainerUplink
from .reads import READ_REQUEST_MB, payload_reads
from .requests import (
    ReadRates,
    RequestLoad,
    payload_prefixes_fit,
    polls_per_month,
    read_rates,
    request_load,
    request_loads,
)
from .timing import size_fleet
from .topology import (
    chain_count,
    chain_pipelined_s,
    object_storage_s,
    payload_gb,
    snapshot_gb,
    star_limited_s,
    star_unlimited_s,
    transfer_s,
)

__all__ = [
    "DEFAULT_EDGES",
    "FILL_ROUND_TRIPS",
    "READ_REQUEST_MB",
    "STALE_AFTER_MONTHS",
    "TOPOLOGIES",
    "TYPICAL_FULL_RATIO",
    "Activation",
    "CdnPrices",
    "FetchModel",
    "FleetLinks",
    "LearnerIdle",
    "Plan",
    "PlanInputs",
    "PriceBook",
    "Provenance",
    "ReadRates",
    "RequestLimits",
    "RequestLoad",
    "RunPricing",
    "StalenessBudget",
    "StoragePrices",
    "TopologyEstimate",
    "Traffic",
    "TrainerUplink",
    "WorkerLink",
    "WorkerOffer",
    "activate_cheapest",
    "at_fraction_s",
    "break_even_step_s",
    "break_even_workers",
    "bubble_ratio",
    "cdn_download_traffic",
    "cdn_fill_s",
    "chain_count",
    "chain_fleet_s",
    "chain_layout",
    "chain_pipelined_s",
    "chain_worker_times_s",
    "cost_per_step_usd",
    "effective_usd_per_gb",
    "estimate",
    "evaluate",
    "fleet_to_csv",
    "hourly_usd",
    "is_feasible",
    "is_stale",
    "learner_idle",
    "load_prices",
    "min_feasible_kappa",
    "month_usd",
    "object_storage_fleet_s",
    "object_storage_s",
    "object_storage_worker_s",
    "object_storage_worker_terms",
    "origin_fetches",
    "params_from_hf_config",
    "parse_fleet",
    "parse_prices",
    "payload_gb",
    "payload_prefixes_fit",
    "payload_reads",
    "polls_per_month",
    "read_rates",
    "request_load",
    "request_loads",
    "requests_usd",
    "require_dropped_fraction",
    "required_pool_rollouts_per_s",
    "run_rates",
    "saving_fraction",
    "size_fleet",
    "slack_s",
    "snapshot_gb",
    "stale_entries",
    "stale_warning",
    "staleness_budget",
    "star_fleet_s",
    "star_limited_s",
    "star_unlimited_s",
    "step_s_at_pool",
    "storage_usd",
    "tiered_usd",
    "transfer_s",
    "transfer_usd",
    "usable_rollouts_per_s",
    "workers_needed",
]
