"""One trainer rank of a two-process job with a real ``torch.distributed`` process group.

Started by test_publish_ranks.py as ``python -m ... <engine kwargs JSON> <rank> <port>``.
It joins a gloo process group on 127.0.0.1 (as verl's trainer ranks join theirs,
on CPU), builds the trainer side as the engine does (``is_master`` is rank 0) but
without importing verl (its import would only add seconds), and runs syncs of
:func:`weights.policy` in lockstep: each a collective (an all-reduce per tensor,
like FSDP's all-gathers), published by every rank. It prints one JSON line: the
run id the broadcast gave it, each sync's metrics and the final publication's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import torch
import torch.distributed as dist

from tests.integrations.verl.weights import policy
from wanrl_s3_verl.config import EngineSettings
from wanrl_s3_verl.trainer_side import TrainerSide


def weights(global_steps: int) -> Iterator[tuple[str, torch.Tensor]]:
    """verl's generator: every tensor goes through a collective every rank must join."""
    for name, t in policy(global_steps).items():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # equal on every rank: unchanged
        yield name, t


def main() -> None:
    kwargs, rank, port = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        trainer = TrainerSide(EngineSettings.from_mapping(kwargs), is_master=rank == 0)
        syncs = [trainer.send(weights(g), g) for g in (0, 1)]
        done = trainer.wait_published(60.0)
        group = trainer.group
        assert group is not None
        out = {"run_id": group.run_id, "ranks": group.ranks, "syncs": syncs, "done": done}
        sys.stdout.write(json.dumps(out) + "\n")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
