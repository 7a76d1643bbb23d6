"""benchmarks/wan_fleet.py's regional store as a SeaweedFS cluster, and its outage phase.

``--store seaweed-cluster``: the store a user who outgrows one machine runs
on-premises, on three machines of its own (namespaces on one bridge in the root
namespace: the data center's LAN, unshaped; the WAN is the hosts' links):

    store0: weed master, volume server 0      store1: volume server 1, filer
    store2: volume server 2, S3 gateway       replication 001: each volume on two servers

The hosts' delay lines lead to the gateway; the trainer publishes to it from the
root namespace, as it does to moto with the default ``--store moto``.

Outage phase (benchmarks/cluster_outage.py): on a run of its own (s3://fleet/outage),
a fresh worker per host (with ``--metrics-port``), the trainer core
(``TrainerPublisher``: an outage fails a publication, the run goes on) publishing a
keyframe and deltas of the same policy as the other phases; a volume server that holds
the version being downloaded crashes and comes back after --outage-s, then the filer
does. Every worker must converge bit-exact, nothing may be lost or partly installed,
and each worker's failures must show in ``wanrl-s3 status``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from cluster_outage import ClusterOutages, CycleReport, OutageWorker, series
from wan_fleet_net import Children, Host, store_lan, wait

from wanrl_s3 import (
    PublishConfig,
    Publisher,
    TrainerPublisher,
    open_store,
    read_statuses,
)
from wanrl_s3.testing import Placement, SeaweedCluster, local_moto, local_seaweed_cluster

STORES = ("moto", "seaweed-cluster")
#: Which store machine each component runs on.
MACHINE_OF = {"master": 0, "volume0": 0, "volume1": 1, "filer": 1, "volume2": 2, "s3": 2}
OUTAGE_URL = "s3://fleet/outage"
METRICS_PORT = 9400  # each worker's, in its own namespace


@contextlib.contextmanager
def regional_store(store: str, ns_prefix: str) -> Iterator[tuple[str, SeaweedCluster | None]]:
    """The bucket's endpoint, and the cluster behind it (None for moto)."""
    if store == "moto":
        with local_moto() as endpoint:
            yield endpoint, None
        return
    with store_lan(3, ns_prefix) as machines:
        placement = {
            name: Placement(machines[k].ip, machines[k].ns) for name, k in MACHINE_OF.items()
        }
        with local_seaweed_cluster(placement=placement) as cluster:
            yield cluster.endpoint_url, cluster


def outage_phase(args, fleet, hosts: list[Host], cluster: SeaweedCluster, work: Path,
                 start_workers, policy, nudge_state) -> list[CycleReport]:  # fmt: skip
    """The outage cycles (a volume server's, then the filer's) on s3://fleet/outage."""
    kids = Children()
    store = open_store(OUTAGE_URL, endpoint_url=cluster.endpoint_url)
    out = work / "outage"
    out.mkdir()
    trainer = TrainerPublisher(
        Publisher(store, PublishConfig(delta="always", keyframe_every=1000)), background=False
    )
    try:
        procs = start_workers(kids, hosts, fleet, cluster.endpoint_url, args, out, OUTAGE_URL,
                              extra=("--metrics-port", str(METRICS_PORT)))  # fmt: skip
        names = [w.name for w in fleet.workers]
        found = lambda: set(names) <= {s.worker_id for s in read_statuses(store)}  # noqa: E731
        wait(found, 120, "the outage phase's workers")
        workers = [
            OutageWorker(name, out / name, f"http://{host.far_ip}:{METRICS_PORT}/metrics",
                         out / f"{name}.log")
            for name, host in zip(names, hosts, strict=True)
        ]  # fmt: skip

        def stop() -> dict[str, int | None]:
            kids.stop(procs)
            return {name: p.returncode for name, p in zip(names, procs, strict=True)}

        states = series(lambda: policy(args.mib, args.seed),
                        lambda prev, v: nudge_state(prev, args.density / 100, seed=v))  # fmt: skip
        scenario = ClusterOutages(cluster, OUTAGE_URL, workers, _publisher(trainer), states,
                                  outage_s=args.outage_s, stuck_bound_s=300.0)  # fmt: skip
        return scenario.run(["volume", "filer"], stop)
    finally:
        kids.stop()
        trainer.close()


def _publisher(trainer: TrainerPublisher):
    def publish(version: int, state: dict[str, np.ndarray]) -> str | None:
        done = trainer.submit(state, version).result()
        if done.failed is not None:
            return f"failed: {done.failed}"
        if done.skipped is not None:
            return f"skipped: {done.skipped}"
        return None

    return publish


def outage_lines(reports: list[CycleReport]) -> list[str]:
    """What each cycle did, its counters, and what broke (for the table)."""
    lines = []
    for r in reports:
        lines.append(r.summary())
        lines.append("  " + ", ".join(f"{k} {n}" for k, n in r.counters.items()))
        lines += [f"  - {counter}: {what}" for counter, what in r.failed]
        lines += [f"  note: {note}" for note in r.notes]
    return lines
