"""The Prometheus client, imported lazily; one registry per process; the HTTP endpoint.

``prometheus-client`` is an optional extra: :func:`prometheus` imports it or
raises one line that says how to install it. Every metrics object registers in
the registry it is given, or in this process's own (:func:`process_registry`,
which also holds the process collector: memory, CPU, open files); a trainer that
already serves Prometheus passes its registry instead, and serves ours with it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import (
    LocalIOError,
    ManifestError,
    NotFoundError,
    SignatureError,
    StoreError,
    UsageError,
    VerificationError,
    VersionConflictError,
)
from ..units import GiB, MiB

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.metrics_core import Metric

INSTALL_HINT = "pip install 'wanrl-s3[metrics]' (prometheus-client)"

#: Seconds of a download, a verification, an install or a publication: 10 ms to 1 h.
SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: Seconds of one small request (a poll of LATEST): 1 ms to 30 s.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: Bytes of a download or a stored version: 1 MiB to 1 TiB, by factors of 4.
BYTES_BUCKETS = (*(float(MiB * 4**k) for k in range(11)), float(1024 * GiB))

_lock = threading.RLock()  # of() makes an object under it, which registers under it
_registry: CollectorRegistry | None = None


def prometheus(what: str = "metrics") -> ModuleType:
    """The ``prometheus_client`` module, or a UsageError saying how to install it."""
    try:
        import prometheus_client
        import prometheus_client.core  # the metric families custom collectors yield
    except ImportError as exc:
        raise UsageError(f"{what} needs prometheus-client: {INSTALL_HINT}") from exc
    return prometheus_client


def process_registry() -> CollectorRegistry:
    """This process's registry of wanrl-s3 metrics (made on first use, with the process
    collector: resident memory, CPU seconds, open files)."""
    global _registry
    with _lock:
        if _registry is None:
            prom = prometheus()
            _registry = prom.CollectorRegistry(auto_describe=True)
            prom.ProcessCollector(registry=_registry)
        return _registry


M = TypeVar("M", bound="RegisteredMetrics")


class RegisteredMetrics:
    """Metrics registered once in one registry: :meth:`of` hands out that one object.

    A second object of the same class in the same registry would register the
    same names twice, which Prometheus refuses; so callers that may meet again
    (two engines in one process) share it through :meth:`of`.
    """

    _made: ClassVar[weakref.WeakKeyDictionary[Any, RegisteredMetrics]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._made = weakref.WeakKeyDictionary()

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.prom = prometheus(type(self).__name__)
        self.registry = registry if registry is not None else process_registry()
        with _lock:
            if self.registry in self._made:
                raise UsageError(
                    f"this registry already holds a {type(self).__name__}: share it "
                    f"({type(self).__name__}.of(registry)) rather than make a second one"
                )
            self._made[self.registry] = self

    def histogram(
        self, name: str, doc: str, buckets: tuple[float, ...], labels: tuple[str, ...] = ()
    ) -> Histogram:
        """A histogram in this object's registry."""
        made: Histogram = self.prom.Histogram(
            name, doc, list(labels), buckets=buckets, registry=self.registry
        )
        return made

    def counter(
        self, name: str, doc: str, labels: tuple[str, ...] = (), *, each: tuple[str, ...] = ()
    ) -> Counter:
        """A counter in this object's registry; ``each``: the values of its one label,
        exported from 0 rather than from their first increment."""
        made: Counter = self.prom.Counter(name, doc, list(labels), registry=self.registry)
        for value in each:
            made.labels(value)
        return made

    @classmethod
    def of(cls: type[M], registry: CollectorRegistry | None = None) -> M:
        """The object of this class in ``registry`` (this process's by default), made once."""
        key = registry if registry is not None else process_registry()
        with _lock:
            made = cls._made.get(key)
            return made if isinstance(made, cls) else cls(key)


@dataclass(frozen=True)
class MetricsServer:
    """The HTTP endpoint Prometheus scrapes (``url``), serving on a daemon thread."""

    url: str
    port: int
    registry: CollectorRegistry
    _httpd: WSGIServer

    def close(self) -> None:
        """Stop serving and free the port. Closing twice is harmless."""
        with _lock:
            for key, server in list(_serving.items()):
                if server is self:
                    del _serving[key]
        self._httpd.shutdown()
        self._httpd.server_close()


_serving: dict[tuple[str, int], MetricsServer] = {}  # (addr, port asked for) -> its server


#: Every interface, as Prometheus exporters do: the server that scrapes is another host.
ALL_INTERFACES = "0.0.0.0"  # noqa: S104


def serve_metrics(
    port: int, *, addr: str = ALL_INTERFACES, registry: CollectorRegistry | None = None
) -> MetricsServer:
    """Serve ``registry`` (this process's by default) at ``http://addr:port/metrics``.

    Port 0 takes any free port (``MetricsServer.port`` says which). Asked again for
    the same address, port and registry (two components of one process: the
    trainer's engine and its sampler), it returns the server already running.
    Where the port cannot be had, a UsageError names it and the reason.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise UsageError(f"metrics port must be an integer in 0..65535, got {port!r}")
    prom = prometheus(f"metrics port {port}")
    served = registry if registry is not None else process_registry()
    with _lock:
        running = _serving.get((addr, port))
        if running is not None and running.registry is served:
            return running
        try:
            httpd, _ = prom.start_http_server(port, addr=addr, registry=served)
        except OSError as exc:
            why = exc.strerror or exc
            raise UsageError(f"cannot serve metrics on {addr}:{port}: {why}") from exc
        bound = int(httpd.server_port)
        host = f"[{addr}]" if ":" in addr else addr
        server = MetricsServer(f"http://{host}:{bound}/metrics", bound, served, httpd)
        if port:
            _serving[(addr, port)] = server
        return server


_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (VersionConflictError, "conflict"),
    (SignatureError, "signature"),
    (ManifestError, "manifest"),
    (VerificationError, "verification"),
    (NotFoundError, "not_found"),
    (StoreError, "store"),
    (LocalIOError, "local_io"),
    (UsageError, "usage"),
)
#: Every value :func:`error_kind` gives (a label takes these and no other).
ERROR_KINDS = (*(kind for _, kind in _KINDS), "other")


def error_kind(exc: BaseException) -> str:
    """A failure's kind for a label: one of :data:`ERROR_KINDS`, never the message."""
    return next((kind for cls, kind in _KINDS if isinstance(exc, cls)), "other")


class LastFailure:
    """When the newest failure happened (wall clock), for a ``last_error_age_seconds`` gauge."""

    def __init__(self, time_s: Callable[[], float] = time.time) -> None:
        self._time_s = time_s
        self._at_s: float | None = None

    def record(self, at_s: float | None = None) -> None:
        at = self._time_s() if at_s is None else at_s
        self._at_s = at if self._at_s is None else max(self._at_s, at)

    def age_s(self) -> float | None:
        """Seconds since the newest failure; None before any."""
        return None if self._at_s is None else max(0.0, self._time_s() - self._at_s)


def gauge(prom: ModuleType, name: str, doc: str, value: float | None) -> Metric:
    """One unlabelled gauge family for a collector: no sample while ``value`` is None
    (nothing to say yet, which a dashboard shows as "no data", not as a false 0)."""
    family = prom.core.GaugeMetricFamily(name, doc)
    if value is not None:
        family.add_metric([], value)
    return family  # type: ignore[no-any-return]
