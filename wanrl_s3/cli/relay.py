"""``wanrl-s3 relay``: copy mode; copy each new version from the primary region to the others.

Reads the regions file (its mode must be ``copy``), watches the primary's
LATEST and commits each new version in every replica: payload objects
(server-side within one S3 service, else streamed), read back and checked
against the manifest's hashes, then the manifest, then LATEST, forwards only.
A copy that does not verify is refused (one log line naming the version and
region; ``--once`` then exits 3) and tried again on the next pass, and a replica
whose copy differs from the primary's is repaired. With ``--verify-key`` only
versions signed by a trusted key, of one run, are relayed. One log line per
version and region. Run one relay per run, with the publisher's credentials;
SIGTERM or Ctrl-C stops it cleanly. With ``--metrics-port PORT`` it serves
Prometheus metrics (docs/operations.md, "Metrics"): each region's version and
lag, bytes and seconds per version relayed, failures by region and kind, last
error age, poll latency.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from ..errors import UsageError
from ..metrics.relay import RelayMetrics
from ..regions.config import RegionsConfig, load_regions
from ..regions.relay import Relay, RelayConfig
from ..regions.relay_observer import IGNORE, RelayObserver
from .common import OnceKeyring, run_arg, verifier_from_args
from .metrics_args import add_metrics_args, metrics_from_args

log = logging.getLogger("wanrl_s3.regions.relay")


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "relay", help="copy mode: relay new versions to the replica regions", description=__doc__
    )
    p.add_argument(
        "--regions",
        required=True,
        metavar="FILE",
        help="the regions file (TOML, `terraform output -raw regions_toml`), mode = copy",
    )
    p.add_argument(
        "--poll-interval-s",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between two looks at the primary's LATEST",
    )
    p.add_argument("--concurrency", type=int, default=8, metavar="N", help="objects copied at once")
    p.add_argument(
        "--verify-key",
        metavar="PUBLIC.pem",
        default=None,
        action=OnceKeyring,
        help="relay only versions (and a LATEST) signed by this Ed25519 public key, or by "
        "one of the keys of this keyring file (reloaded when it changes)",
    )
    p.add_argument(
        "--run",
        metavar="RUN_ID",
        default=None,
        type=run_arg,
        help="relay only this run (the run id of its first version) (default: with "
        "--verify-key, the run the replicas' signed LATEST names, else the primary's LATEST's; "
        "without, any run)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="bring every replica up to date once, then exit (cron, scripts)",
    )
    add_metrics_args(p, "relay")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    regions = load_regions(args.regions)
    if regions.mode != "copy":
        raise UsageError(
            f"{args.regions}: mode is {regions.mode!r}; the relay serves "
            'mode = "copy" (fanout: the publisher writes every region; '
            "replicate: bucket replication copies)"
        )
    if not regions.replicas:
        raise UsageError(
            f"{args.regions}: only the primary is listed; add a "
            "[regions.NAME] table for each replica"
        )
    config = RelayConfig(poll_interval_s=args.poll_interval_s, concurrency=args.concurrency)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s wanrl-s3 relay: %(message)s"
    )
    with metrics_from_args(args, RelayMetrics.of, log) as metrics:
        _relay(args, regions, config, metrics or IGNORE)
    log.info("stopped")
    return 0


def _relay(
    args: argparse.Namespace, regions: RegionsConfig, config: RelayConfig, observer: RelayObserver
) -> None:
    verifier = verifier_from_args(args)
    with Relay.from_regions(
        regions, config, observer=observer, verifier=verifier, run=args.run
    ) as relay:
        log.info(
            "relaying %s (%s) to %s",
            regions.primary,
            relay.source.url,
            ", ".join(f"{name} ({s.url})" for name, s in relay.replicas.items()),
        )
        if args.once:
            relay.sync_once()
        else:
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            relay.run(stop)
