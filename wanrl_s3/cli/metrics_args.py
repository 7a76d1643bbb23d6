"""``--metrics-port`` and ``--metrics-addr``, shared by ``worker`` and ``relay``.

Off by default. prometheus-client is imported only when the flag is given, and
a missing package, a port in use or a bad address is one line and exit 2,
before the command does any work.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from ..errors import UsageError
from ..metrics.exposition import ALL_INTERFACES, INSTALL_HINT
from .common import non_negative_int

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

M = TypeVar("M")


def add_metrics_args(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--metrics-port",
        type=non_negative_int,
        default=None,
        metavar="PORT",
        help=f"serve Prometheus metrics of this {what} at http://ADDR:PORT/metrics "
        f"(default: off; 0: any free port, logged at start); needs {INSTALL_HINT}",
    )
    parser.add_argument(
        "--metrics-addr",
        default=None,
        metavar="ADDR",
        help=f"with --metrics-port: the address to listen on (default {ALL_INTERFACES}, "
        "every interface; 127.0.0.1 keeps it to this host)",
    )


@contextmanager
def metrics_from_args(
    args: argparse.Namespace,
    make: Callable[[CollectorRegistry | None], M],
    log: logging.Logger,
) -> Iterator[M | None]:
    """The command's metrics object, served over HTTP for the block, if ``--metrics-port``
    asks (else None)."""
    if args.metrics_port is None:
        if args.metrics_addr is not None:
            raise UsageError("--metrics-addr needs --metrics-port PORT")
        yield None
        return
    from ..metrics.exposition import serve_metrics

    metrics = make(None)  # this process's registry, which the endpoint serves
    server = serve_metrics(args.metrics_port, addr=args.metrics_addr or ALL_INTERFACES)
    log.info("metrics at %s", server.url)
    try:
        yield metrics
    finally:
        server.close()
