"""The local SeaweedFS cluster: replicated, each part killed and started again, gone with its block.

Reads go on through a volume server's crash (the other copy serves them) and writes
go to the servers left; a filer crash fails requests until it is back, with every
object it knew about. Everything runs on 127.0.0.1 (no namespaces).
"""

from __future__ import annotations

import os
from pathlib import Path

import botocore.exceptions as bx
import pytest

from tests.fetch.test_stream import wait_until
from tests.testing.test_seaweed import _bindable
from wanrl_s3 import NotFoundError, open_store
from wanrl_s3.errors import UsageError
from wanrl_s3.testing import Placement, local_seaweed_cluster, make_bucket
from wanrl_s3.testing.seaweed import RUNNING, s3_client


def test_a_volume_server_and_the_filer_crash_and_come_back_with_every_object() -> None:
    with local_seaweed_cluster() as cluster:
        assert cluster.volume_servers() == {"volume0", "volume1", "volume2"}
        assert RUNNING[cluster.endpoint_url] is cluster
        bucket = make_bucket(cluster.endpoint_url)
        store = open_store(f"s3://{bucket}/run", endpoint_url=cluster.endpoint_url)
        data = os.urandom(3 * 2**20 + 5)
        store.put_bytes("v/1.bin", data)
        holders = cluster.holders(bucket, "run/v/1.bin")
        assert len(holders) == 2  # replication 001: two copies on two of the three servers

        victim = sorted(holders)[0]
        cluster.kill(victim)
        assert wait_until(lambda: victim not in cluster.volume_servers(), 30.0)  # the master's
        # stream from it breaks at once, but a busy master may take a moment to drop it
        assert store.get_bytes("v/1.bin") == data  # read from the other copy
        store.put_bytes("v/2.bin", b"written while a server is down")
        cluster.start(victim)
        assert cluster.volume_servers() == {"volume0", "volume1", "volume2"}

        cluster.kill("filer")
        once = s3_client(cluster.endpoint_url)  # one try per request: the outage shows
        with pytest.raises(bx.ClientError, match="InternalError"):
            once.get_object(Bucket=bucket, Key="run/v/1.bin")
        with pytest.raises(UsageError, match="s3 is running"):
            cluster.start("s3")  # s3 is running: not started twice
        cluster.start("filer")
        assert store.get_bytes("v/1.bin") == data
        assert store.get_bytes("v/2.bin") == b"written while a server is down"
        with pytest.raises(NotFoundError):
            store.get_bytes("v/3.bin")
        data_dir, ports = cluster.data_dir, cluster.ports
        procs = [c.proc for c in cluster.components.values()]
    assert all(p is not None and p.poll() is not None for p in procs)
    assert not data_dir.exists() and cluster.endpoint_url not in RUNNING
    assert all(_bindable(p) and _bindable(p + 10000) for p in ports)
    assert not [p for port in ports for p in Path("/tmp").glob(f"seaweedfs-*-{port + 10000}.sock")]
    assert not [p for port in ports for p in Path("/tmp").glob(f"wanrl-seaweedfs-{port}-*.sock")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replication": "002", "volumes": 2}, "needs at least 3 volume servers"),
        ({"replication": "01"}, "three digits"),
        ({"volumes": 0}, "at least 1"),
        ({"placement": {"volume3": Placement()}}, "no component 'volume3'"),
    ],
)
def test_a_cluster_that_cannot_be_is_refused_before_anything_starts(
    kwargs: dict, message: str
) -> None:
    with pytest.raises(UsageError, match=message), local_seaweed_cluster(**kwargs):
        pass
