"""Who this trainer rank is among how many, and the run id all ranks of one launch share.

When every trainer rank publishes a share of each version (a
:class:`~wanrl_s3.ShardedPublisher` per rank), the ranks meet in the store under a
run id. That id must be the same on every rank of one launch and new for every
launch: share records are keyed by it, so ranks with different ids never meet
(the version times out), and a launch that reused its predecessor's id could have
its committing rank merge a record that a killed rank of the old launch left
behind (the publisher refuses what it can recognise, but a rank killed outright
leaves no abort marker). So :meth:`RankGroup.discover` has rank 0 make a fresh id
and broadcast it through the trainer's own ``torch.distributed`` process group;
nothing in a config has to be kept unique by hand.

The broadcast is a fixed-size ``uint8`` tensor, not ``broadcast_object_list``:
the latter pickles, and nothing in this product unpickles. Without a process
group (a single-process trainer) there is one rank.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from ..errors import UsageError

RUN_ID_BYTES = 64  # the broadcast buffer: ids are ASCII, shorter, zero-padded


@dataclass(frozen=True)
class RankGroup:
    """This rank, the number of publishing ranks, and the launch's shared run id."""

    rank: int
    ranks: int
    run_id: str

    def __post_init__(self) -> None:
        for name, value, low in (("rank", self.rank, 0), ("ranks", self.ranks, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"RankGroup.{name} must be an integer >= {low}, got {value!r}")
        if self.rank >= self.ranks:
            raise UsageError(f"RankGroup.rank must be below ranks ({self.ranks}), got {self.rank}")
        encode_run_id(self.run_id)  # refuses what the broadcast could not carry

    @classmethod
    def discover(cls, *, prefix: str = "run", require_group: bool = False) -> RankGroup:
        """From ``torch.distributed``'s default group: a collective, every rank calls it.

        Rank 0's fresh run id (``prefix``, the time, random bits) reaches every rank.
        Without an initialised process group this process is rank 0 of 1, unless
        ``require_group`` (a rank that knows it is not the first): then a UsageError.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            if require_group:
                raise UsageError(
                    "this trainer rank needs torch.distributed initialised to learn its rank "
                    "and the launch's run id, and this process has no process group"
                )
            return cls(0, 1, new_run_id(prefix))
        rank, ranks = dist.get_rank(), dist.get_world_size()
        return cls(rank, ranks, broadcast_run_id(new_run_id(prefix) if rank == 0 else None))


def new_run_id(prefix: str = "run") -> str:
    """A fresh id for one launch: when it started, and random bits so that two never clash."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(6)}"


def encode_run_id(run_id: str) -> bytes:
    """The id as the broadcast carries it: ASCII, zero-padded to RUN_ID_BYTES."""
    data = run_id.encode("ascii", errors="replace") if isinstance(run_id, str) else b""
    if not data or len(data) >= RUN_ID_BYTES or b"\0" in data or not run_id.isascii():
        raise UsageError(
            f"a run id must be 1 to {RUN_ID_BYTES - 1} ASCII characters, got {run_id!r}"
        )
    return data.ljust(RUN_ID_BYTES, b"\0")


def decode_run_id(data: bytes) -> str:
    return data.rstrip(b"\0").decode("ascii")


def broadcast_run_id(run_id: str | None) -> str:
    """Rank 0's ``run_id`` on every rank (the others pass None), through the default group."""
    import torch
    import torch.distributed as dist

    device = torch.device("cpu")
    if dist.get_backend() == "nccl":  # NCCL moves CUDA tensors only
        device = torch.device("cuda", torch.cuda.current_device())
    buf = torch.zeros(RUN_ID_BYTES, dtype=torch.uint8)
    if run_id is not None:
        buf = torch.frombuffer(bytearray(encode_run_id(run_id)), dtype=torch.uint8)
    buf = buf.to(device)
    dist.broadcast(buf, src=0)
    return decode_run_id(bytes(buf.cpu().tolist()))
