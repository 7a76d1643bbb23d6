"""A publisher killed (SIGKILL) mid-upload leaves the previous version intact and served,
and the garbage collector removes what it left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.fleet.retention import RetentionPolicy, collect
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store

CHILD = r"""
import sys, time
import numpy as np
from wanrl_s3.store import open_store
from wanrl_s3.publish.publisher import Publisher, PublishConfig

store = open_store(sys.argv[1], endpoint_url=sys.argv[2])

def tensors():
    for i in range(1000):
        yield f"layer.{i}", np.full(2**20, i, np.float32)  # 4 MiB each
        if i == 4:
            open(sys.argv[3], "w").close()  # tell the parent: uploads are under way
            time.sleep(60)

# raw: constant tensors would code to nearly nothing, and uploads must be under way
config = PublishConfig(delta="never", part_bytes=5 * 2**20, full_coding="raw")
Publisher(store, config).publish(tensors(), 2)
"""


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_publish_killed_before_manifest(
    kind: str, tmp_path: Path, s3_url: str, s3_endpoint: str
) -> None:
    url = s3_url if kind == "s3" else f"file://{tmp_path}/store"
    store = open_store(url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig(delta="never")).publish({"w": np.ones(8, np.float32)}, 1)
    flag = tmp_path / "uploading"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, s3_endpoint, str(flag)], env={**os.environ}
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert child.poll() is None, "publisher exited early"
            assert time.monotonic() < deadline, "publisher never started uploading"
            time.sleep(0.05)
        time.sleep(0.5)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()

    assert not store.exists(layout.manifest_key(2))
    with Subscriber(store) as sub:
        assert sub.latest().version == 1
        assert sub.fetch().tensors["w"].tolist() == [1.0] * 8
    leftovers = [o.key for o in store.list("v/000000000002/")]
    uploads = store.pending_uploads()
    assert leftovers or uploads, "the killed publish should have left something to collect"

    young = collect(store, RetentionPolicy(keep_versions=5, grace_s=3600), dry_run=True)
    assert young.deleted_objects == 0  # unreferenced but young: might be a publish in progress
    assert young.aborted_uploads == 0  # its uploads are young too
    report = collect(store, RetentionPolicy(keep_versions=5, grace_s=0), now_s=time.time() + 10)
    assert report.kept_versions == [1]
    assert store.list("v/000000000002/") == [] and store.pending_uploads() == []
    with Subscriber(store) as sub:
        assert sub.fetch().tensors["w"].tolist() == [1.0] * 8
