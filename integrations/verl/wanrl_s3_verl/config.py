"""The adapter's settings: frozen, validated, and named by the Hydra key that sets them.

verl hands our settings over as keyword arguments (the checkpoint engine's
``engine_kwargs.wanrl_s3``: a plain dict on trainer ranks, a ``DictConfig`` on
rollout ranks) or as one mapping (the sampler's ``sampler_kwargs``). Either way a
mistake must surface as one line that names the full Hydra key and the fix, because
verl shows it as a Ray worker's exception, far from the config file. So every
check here is explicit and raises :class:`wanrl_s3.errors.UsageError`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from wanrl_s3 import (
    DELTA_MODES,
    PUBLISH_DTYPES,
    MetricsServer,
    StalenessConfig,
    StalenessFilter,
    StalenessMetrics,
    StoreRoles,
    VersionMap,
    check_staleness,
    check_worker_id,
    serve_metrics,
    store_roles,
)
from wanrl_s3.errors import UsageError
from wanrl_s3.store import ObjectStore

ENGINE_KEY = "actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs.wanrl_s3"
SAMPLER_KEY = "trainer.v1.sampler.sampler_kwargs"
QUEUE_KEY = "wanrl_s3.message_queue"
PUBLISH_RANKS = ("master", "all")
ASSIGN_MODES = ("balanced", "own")

C = TypeVar("C", bound="_Settings")
log = logging.getLogger(__name__)
_warned: set[str] = set()


def plain_mapping(values: object, where: str) -> dict[str, Any]:
    """A plain ``dict`` from a dict, any Mapping, or an OmegaConf ``DictConfig`` (resolved)."""
    if values is None:
        return {}
    to_container = _omegaconf_to_container(values)
    if to_container is not None:
        values = to_container
    if not isinstance(values, Mapping):
        raise UsageError(f"{where} must be a mapping of settings, got {type(values).__name__}")
    return {str(k): v for k, v in values.items()}


def _omegaconf_to_container(values: object) -> dict[str, Any] | None:
    if type(values).__module__.split(".")[0] != "omegaconf":
        return None
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(values, resolve=True)  # type: ignore[arg-type]
    return container if isinstance(container, dict) else None  # type: ignore[return-value]


@dataclass(frozen=True)
class _Settings:
    """Shared checks; subclasses name their Hydra key in ``KEY``."""

    KEY: ClassVar[str] = ""
    # a renamed setting's old key -> its name now: still read, with one warning
    RENAMED: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_mapping(cls: type[C], values: object) -> C:
        """Build from verl's mapping; unknown or missing keys are refused by name."""
        given = cls._renamed(plain_mapping(values, cls.KEY))
        known = [f.name for f in fields(cls) if f.init]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise UsageError(
                f"{cls.KEY}.{unknown[0]} is not a setting of the wanrl_s3 adapter; "
                f"valid keys: {', '.join(known)}"
            )
        missing = [
            f.name
            for f in fields(cls)
            if f.init
            and f.default is MISSING
            and f.default_factory is MISSING
            and f.name not in given
        ]
        if missing:
            raise UsageError(
                f"{cls.KEY}.{missing[0]} is required; set it, e.g. '+{cls.KEY}.{missing[0]}=...'"
            )
        return cls(**given)

    @classmethod
    def _renamed(cls, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` with each old key that is set moved to its new name (a null one, as the
        shipped YAML passes when the user sets only the new key, is dropped)."""
        for old, new in cls.RENAMED.items():
            value = given.pop(old, None)
            if value is None:
                continue
            if given.get(new) not in (None, value):
                raise UsageError(
                    f"{cls.KEY}.{old} is the old name of {cls.KEY}.{new}: set {new} alone"
                )
            if old not in _warned:
                _warned.add(old)
                log.warning("wanrl_s3: %s.%s is deprecated: use %s.%s", cls.KEY, old, cls.KEY, new)
            given[new] = value
        return given

    def _fail(self, name: str, problem: str, value: object) -> UsageError:
        return UsageError(f"{self.KEY}.{name} {problem}, got {value!r}")

    def _str(self, name: str, *, required: bool = False) -> None:
        value = getattr(self, name)
        if value is None:
            if required:
                raise UsageError(
                    f"{self.KEY}.{name} is required; set it, e.g. '+{self.KEY}.{name}=...'"
                )
            return
        if not isinstance(value, str) or not value:
            raise self._fail(name, "must be a non-empty string", value)

    def _int(self, name: str, minimum: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._fail(name, f"must be an integer >= {minimum}", value)

    def _float(self, name: str, minimum: float, *, strict: bool) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(name, "must be a number of seconds", value)
        if value < minimum or (strict and value == minimum):
            raise self._fail(name, f"must be {'>' if strict else '>='} {minimum:g}", value)
        object.__setattr__(self, name, float(value))

    def _choice(self, name: str, choices: tuple[str, ...]) -> None:
        value = getattr(self, name)
        if value not in choices:
            raise self._fail(name, f"must be one of {', '.join(choices)}", value)

    def _bool(self, name: str) -> None:
        value = getattr(self, name)
        if not isinstance(value, bool):
            raise self._fail(name, "must be true or false", value)


@dataclass(frozen=True)
class StoreSettings(_Settings):
    """Where the snapshots live: one store (``store_url``) or a regions file (``regions``);
    and where this process serves its Prometheus metrics, if anywhere (``metrics_port``)."""

    store_url: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    s3_region: str | None = None
    regions: str | None = None  # a regions file (terraform output -raw regions_toml)
    # serve this process's metrics at http://metrics_addr:metrics_port/metrics (off: None)
    metrics_port: int | None = None
    metrics_addr: str = "0.0.0.0"  # noqa: S104  (every interface: Prometheus is elsewhere)

    def __post_init__(self) -> None:
        for name in ("store_url", "endpoint_url", "profile", "s3_region", "regions"):
            self._str(name)
        if self.metrics_port is not None:
            self._int("metrics_port", 0)
        self._str("metrics_addr", required=True)
        if self.store_url is not None and self.regions is not None:
            raise UsageError(
                f"{self.KEY}.store_url and {self.KEY}.regions exclude each other: "
                "the regions file names every store; set one of them"
            )

    def roles(self) -> StoreRoles:
        """The run's stores by role (publish, read, report), as the CLI decides them."""
        if self.store_url is None and self.regions is None:
            raise UsageError(
                f"{self.KEY}.store_url is required (or {self.KEY}.regions), "
                "e.g. s3://bucket/run-prefix"
            )
        key = "store_url" if self.regions is None else "regions"
        try:
            return store_roles(
                self.store_url,
                regions=self.regions,
                endpoint_url=self.endpoint_url,
                profile=self.profile,
                region=self.s3_region,
            )
        except UsageError as exc:
            raise UsageError(f"{self.KEY}.{key}: {exc}") from exc

    def serve_metrics(self) -> MetricsServer | None:
        """This process's metrics over HTTP, once per process, if ``metrics_port`` is set."""
        if self.metrics_port is None:
            return None
        try:
            return serve_metrics(self.metrics_port, addr=self.metrics_addr)
        except UsageError as exc:
            raise UsageError(f"{self.KEY}.metrics_port: {exc}") from exc

    @property
    def where(self) -> str:
        """The store, or the regions file, for messages."""
        return self.store_url or f"the regions of {self.regions}"

    def publish_stores(self) -> list[ObjectStore]:
        """Where a publisher writes: the store, or the regions its mode has it write."""
        return self.roles().publish()

    def all_stores(self) -> list[ObjectStore]:
        """Every store rollout workers may report to: the store, or every region's."""
        return self.roles().report()


@dataclass(frozen=True)
class EngineSettings(StoreSettings):
    """``engine_kwargs.wanrl_s3``: both sides of the checkpoint engine."""

    KEY: ClassVar[str] = ENGINE_KEY
    RENAMED: ClassVar[Mapping[str, str]] = {"node_share_dir": "host_cache_dir"}

    delta: str = "auto"
    keyframe_every: int = 10
    payload_prefixes: int = 1
    publish_every: int = 1
    dtype: str = "bf16"
    poll_interval_s: float = 2.0
    concurrency: int = 16
    wait_for_first_s: float = 600.0
    worker_id: str = "verl"
    signing_key: str | None = None
    verify_key: str | None = None
    # trainer: publish without signing_key onto a store whose LATEST is signed (refused
    # otherwise: every rollout worker with verify_key would refuse the unsigned versions)
    allow_unsigned: bool = False
    region: str = "auto"  # with regions: the one to read from, or "auto" (measured fastest)
    # the host cache: rollout engines of one host download each version once, into this
    # directory
    host_cache_dir: str | None = None
    # rollout: glibc maps allocations of 1 MiB or more on their own (process-wide), so
    # freed download buffers go back to the system (wanrl_s3.return_big_buffers)
    return_big_buffers: bool = True
    # trainer: the sync returns once the weights are in host memory; publishing goes on
    # in the background (false: the sync publishes before it returns)
    background: bool = True
    # trainer: how long closing (or exiting) waits for a background publication in flight
    close_wait_s: float = 600.0
    # trainer: "master" publishes from the master rank alone; "all": every rank publishes
    # a share of each version (ShardedPublisher) and the master commits it
    publish_ranks: str = "master"
    # with publish_ranks: all, who publishes what: "balanced" (every rank sees every
    # tensor, as verl's FSDP and Megatron generators yield them) or "own" (each rank's own)
    assign: str = "balanced"
    # with publish_ranks: all, how long the master waits for the last share after its own
    share_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._str("store_url", required=self.regions is None)
        self._str("host_cache_dir")
        self._str("region", required=True)
        self._choice("delta", DELTA_MODES)
        self._int("keyframe_every", 1)
        self._int("payload_prefixes", 1)
        self._int("publish_every", 1)
        self._choice("dtype", PUBLISH_DTYPES)
        self._float("poll_interval_s", 0.0, strict=True)
        self._int("concurrency", 1)
        self._float("wait_for_first_s", 0.0, strict=False)
        self._str("worker_id", required=True)
        try:
            check_worker_id(self.worker_id)
        except UsageError as exc:
            raise UsageError(f"{self.KEY}.worker_id: {exc}") from exc
        self._str("signing_key")
        self._str("verify_key")
        self._bool("background")
        self._bool("allow_unsigned")
        self._bool("return_big_buffers")
        self._float("close_wait_s", 0.0, strict=False)
        self._choice("publish_ranks", PUBLISH_RANKS)
        self._choice("assign", ASSIGN_MODES)
        self._float("share_timeout_s", 0.0, strict=True)
        if self.assign != "balanced" and self.publish_ranks != "all":
            raise self._fail("assign", "applies only with publish_ranks: all", self.assign)

    def read_store(self) -> tuple[ObjectStore, str]:
        """A rollout engine's store and the region it is in ("" without regions)."""
        roles = self.roles()
        try:
            store, choice = roles.read(self.region)  # probes the regions: rollout side only
        except UsageError as exc:
            raise UsageError(f"{self.KEY}.region: {exc}") from exc
        return store, "" if choice is None else choice.region

    def rollout_worker_id(self) -> str:
        """This process's id in the bucket's workers/ folder: the prefix, host and pid."""
        host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
        return f"{self.worker_id}-{host or 'host'}-{os.getpid()}"[:128]


@dataclass(frozen=True)
class FilterSettings(StoreSettings):
    """The staleness budget and, optionally, the store whose rollout workers say what they hold.

    Without ``store_url`` a trajectory's verl tag (``min_global_steps``) is taken at
    face value; with it, the tag is mapped to the policy version the rollout
    workers had actually installed at that step (:class:`wanrl_s3.VersionMap`).
    """

    KEY: ClassVar[str] = SAMPLER_KEY

    staleness: int = 3
    force: bool = False
    worker_id: str = ""  # only rollout workers whose id starts with this; "" = all
    refresh_s: float = 5.0
    staleness_config: StalenessConfig = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._bool("force")
        self._int("staleness", 1)
        if not isinstance(self.worker_id, str):
            raise self._fail("worker_id", "must be a string (a worker id prefix)", self.worker_id)
        self._float("refresh_s", 0.0, strict=False)
        try:
            check_staleness(self.staleness, force=self.force, fix=f"set {self.KEY}.force=true")
        except UsageError as exc:
            raise UsageError(f"{self.KEY}.staleness: {exc}") from exc
        object.__setattr__(
            self, "staleness_config", StalenessConfig(self.staleness, force=self.force)
        )

    def staleness_filter(self, name: str) -> StalenessFilter[Any]:
        """A filter with this budget, exported as ``filter=name`` (and this process's metrics
        served) when ``metrics_port`` is set."""
        made: StalenessFilter[Any] = StalenessFilter(self.staleness_config)
        if self.metrics_port is not None:
            StalenessMetrics.of().track(made, name=name)
            self.serve_metrics()
        return made

    def version_map(self) -> VersionMap | None:
        """What the rollout workers report, or None without a store (tags at face value)."""
        if self.store_url is None and self.regions is None:
            return None
        return VersionMap(self.all_stores(), worker_prefix=self.worker_id, refresh_s=self.refresh_s)


@dataclass(frozen=True)
class QueueSettings(FilterSettings):
    """The fully-async MessageQueue adapter's settings (same keys as the sampler's)."""

    KEY: ClassVar[str] = QUEUE_KEY


def true_version(versions: VersionMap | None, global_steps: int) -> int:
    """A verl step tag's policy version: as the rollout workers recorded it, or (without
    a store to read their records from) the tag itself."""
    return global_steps if versions is None else versions.true_version(global_steps)
