"""A process that forks after encoding a delta: the child encodes too, it does not hang."""

from __future__ import annotations

import os
import time

import numpy as np

from wanrl_s3.codec import decode_delta, encode_delta


def _pair(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    old = rng.integers(0, 2**16, 4_000_000, dtype=np.uint16)
    new = old.copy()
    new[rng.integers(0, old.size, old.size // 100)] ^= 1
    return old, new


def test_a_forked_child_encodes_with_its_own_threads() -> None:
    old, new = _pair(1)
    encode_delta(old, new, threads=2)  # the parent's shared pool now exists
    pid = os.fork()
    if pid == 0:  # the child: encode and decode once more, then report by exit code
        try:
            payload = encode_delta(old, new, threads=2)
            ok = payload is not None and np.array_equal(decode_delta(payload, old), new)
            os._exit(0 if ok else 1)
        finally:
            os._exit(2)
    for _ in range(600):  # 60 s
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung in the codec's thread pool")
