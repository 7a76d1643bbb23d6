"""One trainer rank of a two-process job with a real ``torch.distributed`` process group.

Started by test_ranks.py as ``python -m ... <store JSON> <rank> <port>``. It joins a
gloo process group on 127.0.0.1 (as FSDP trainer ranks join theirs, on CPU), learns
its rank and the launch's run id from :meth:`wanrl_s3.RankGroup.discover`, and
publishes two versions of :func:`weights.policy` through the trainer core, every rank
its share: each submit's tensors go through a collective (an all-reduce per tensor,
like FSDP's all-gathers) that every rank joins in lockstep. It prints one JSON line:
the run id the broadcast gave it, and how each version ended on this rank.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import torch
import torch.distributed as dist

from tests.trainer.weights import policy
from wanrl_s3 import RankGroup, ShardedPublisher, TrainerPublisher
from wanrl_s3.store import open_store


def weights(version: int) -> Iterator[tuple[str, torch.Tensor]]:
    """A trainer's generator: every tensor goes through a collective every rank must join."""
    for name, t in policy(version).items():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # equal on every rank: unchanged
        yield name, t


def main() -> None:
    where, rank, port = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        group = RankGroup.discover(prefix="test")
        store = open_store(where["store_url"], endpoint_url=where["endpoint_url"])
        publisher = ShardedPublisher(
            store, rank=group.rank, ranks=group.ranks, run_id=group.run_id, timeout_s=60.0
        )
        ended = []
        with TrainerPublisher(publisher, dtype="bf16") as trainer:
            for version in (0, 1):
                done = trainer.submit(weights(version), version).result(120.0)
                result = done.result
                kind = None if result is None else result.kind
                ended.append(
                    {"published": done.published, "kind": kind, "bytes": trainer.host_bytes}
                )
        out = {"run_id": group.run_id, "rank": group.rank, "ranks": group.ranks, "ended": ended}
        sys.stdout.write(json.dumps(out) + "\n")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
