"""A trainer process that publishes through the trainer core, driven over stdin.

Started by test_exit.py with ``{"store_url": ..., "endpoint_url": ...}`` as argv[1].
It publishes :func:`weights.policy` through a :class:`wanrl_s3.TrainerPublisher`
(bf16, in the background, as a trainer does). Commands (JSON lines): ``send`` (one
submit at ``version``: the version queued), ``wait`` (until the publication is done:
its version and whether it was a delta) and ``exit`` (return from main at once,
publication in flight or not: the interpreter's exit is under test). Logs go to
stderr, for the test to read.
"""

from __future__ import annotations

import json
import logging
import sys

from tests.trainer.weights import policy
from wanrl_s3 import Publisher, TrainerPublisher
from wanrl_s3.store import open_store


def reply(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True)
    where = json.loads(sys.argv[1])
    store = open_store(where["store_url"], endpoint_url=where["endpoint_url"])
    trainer = TrainerPublisher(Publisher(store), dtype="bf16")
    pending = None
    reply({"ready": True})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "send":
            pending = trainer.submit(policy(cmd["version"]).items(), cmd["version"])
            reply({"queued_version": cmd["version"]})
        elif cmd["cmd"] == "wait" and pending is not None:
            result = pending.result(60.0).result
            assert result is not None
            reply({"version": result.version, "is_delta": result.kind == "delta"})
        else:
            reply({"bye": True})
            return


if __name__ == "__main__":
    main()
