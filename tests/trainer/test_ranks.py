"""Ranks: who this rank is, and the launch's run id, broadcast from rank 0 without pickle."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.trainer.support import ROOT
from tests.trainer.weights import digests, expected
from wanrl_s3 import RankGroup, Subscriber
from wanrl_s3.errors import UsageError
from wanrl_s3.store import open_store
from wanrl_s3.trainer.ranks import decode_run_id, encode_run_id, new_run_id


def test_run_ids_travel_as_fixed_size_bytes() -> None:
    run_id = new_run_id()
    assert run_id != new_run_id() and decode_run_id(encode_run_id(run_id)) == run_id
    assert new_run_id("verl").startswith("verl-")
    for bad in ("", "x" * 64, "caf\u00e9", "a\0b"):
        with pytest.raises(UsageError, match="a run id must be"):
            encode_run_id(bad)


def test_a_rank_group_is_checked_on_creation() -> None:
    for rank, ranks in ((-1, 2), (2, 2), (0, 0), (True, 2)):
        with pytest.raises(UsageError, match=r"RankGroup\.rank"):
            RankGroup(rank, ranks, "r")
    with pytest.raises(UsageError, match="a run id must be"):
        RankGroup(0, 1, "")


def test_without_a_process_group_a_process_is_rank_0_of_1_unless_it_must_have_one() -> None:
    group = RankGroup.discover(prefix="solo")
    assert (group.rank, group.ranks) == (0, 1) and group.run_id.startswith("solo-")
    with pytest.raises(UsageError, match=r"needs torch\.distributed initialised"):
        RankGroup.discover(require_group=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # two processes that import torch and join a gloo group: 18 s here
def test_two_processes_with_a_gloo_process_group_share_one_broadcast_run_id(
    s3_url: str, s3_endpoint: str
) -> None:
    """Real ``torch.distributed``: rank 0's run id reaches rank 1, submits run in lockstep."""
    port, arg = free_port(), json.dumps({"store_url": s3_url, "endpoint_url": s3_endpoint})
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.trainer.rank_child", arg, str(r), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for r in (0, 1)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out))
    assert outs[0]["run_id"] == outs[1]["run_id"] and [o["ranks"] for o in outs] == [2, 2]
    assert [o["rank"] for o in outs] == [0, 1]
    assert [e["kind"] for e in outs[0]["ended"]] == ["full", "delta"]  # the committing rank
    assert [e["published"] for e in outs[1]["ended"]] == [True, True]
    assert all(e["bytes"] > 0 for o in outs for e in o["ended"])  # each holds a share
    sub = Subscriber(open_store(s3_url, endpoint_url=s3_endpoint))
    assert sub.manifest(1).run_id == outs[0]["run_id"]
    assert digests(sub.fetch(1).to_torch()) == expected(1)
    assert digests(sub.fetch(0).to_torch()) == expected(0)
