"""A trainer master's side of the ``wanrl_s3`` engine in its own process, driven over stdin.

Started by test_background.py with ``engine_kwargs.wanrl_s3`` as argv[1]. It builds
the engine's trainer side as the engine does (settings checked the same way,
``is_master=True``) but without importing verl, whose import would only add
seconds: what is under test is this process's exit, not verl's registry (the
in-process tests build the engine through verl). Commands (JSON lines): ``send``
(one sync of :func:`weights.policy` at ``global_steps``: its metrics), ``wait``
(until the background publication is done: its figures) and ``exit`` (return from
main at once, publication in flight or not: the interpreter's exit is under test).
Logs go to stderr, for the test to read.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from tests.integrations.verl.weights import policy
from wanrl_s3_verl.config import EngineSettings
from wanrl_s3_verl.trainer_side import TrainerSide


def reply(obj: dict[str, Any] | None) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True)
    trainer = TrainerSide(EngineSettings.from_mapping(json.loads(sys.argv[1])), is_master=True)
    reply({"ready": True})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "send":
            g = cmd["global_steps"]
            reply(trainer.send((item for item in policy(g).items()), g))
        elif cmd["cmd"] == "wait":
            reply(trainer.wait_published(60.0))
        else:
            reply({"bye": True})
            return


if __name__ == "__main__":
    main()
