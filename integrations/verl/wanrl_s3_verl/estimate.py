"""``python -m wanrl_s3_verl.estimate RUN.yaml [wanrl-s3 estimate flags]``: plan a verl run.

Reads the batch (``data.train_batch_size`` x ``actor_rollout_ref.rollout.n``), the
run length (``trainer.total_training_steps``) and the parameter count (from the
``config.json`` in the local directory ``actor_rollout_ref.model.path`` points at)
out of a verl trainer YAML, then runs ``wanrl-s3 estimate`` with them as
``--batch``, ``--steps`` and ``--params``. A flag you pass yourself wins over the
file. Every other flag goes to ``wanrl-s3 estimate`` unchanged (``--t-train-s`` is
required there), so the table, ``--json``, ``--plot`` and the exit codes are the
command's own: this module only knows verl's keys, the planner stays verl-free.

Needs PyYAML (installed with the ``verl`` extra); verl itself is not imported.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from wanrl_s3.errors import UsageError, WanrlError

from .trainer_config import read_verl_config

PROG = "python -m wanrl_s3_verl.estimate"
USAGE = f"usage: {PROG} RUN.yaml --t-train-s S [wanrl-s3 estimate flags]"


def _given(flag: str, argv: Sequence[str]) -> bool:
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in argv)


def estimate_flags(config: str, argv: Sequence[str] = ()) -> list[str]:
    """The ``wanrl-s3 estimate`` flags the verl config supplies, for those ``argv`` lacks."""
    run = read_verl_config(config)
    flags = []
    if not _given("--params", argv):
        if run.params is None:
            raise UsageError(
                f"{config}: no local config.json under model path {run.model_path}; pass --params"
            )
        flags += ["--params", str(int(run.params))]
    if run.batch is not None and not _given("--batch", argv):
        flags += ["--batch", str(run.batch)]
    if run.steps is not None and not _given("--steps", argv):
        flags += ["--steps", str(run.steps)]
    return flags


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    if not args or args[0].startswith("-"):
        print(f"{PROG}: error: give the verl trainer YAML first; {USAGE}", file=sys.stderr)
        return UsageError.exit_code
    config, rest = args[0], args[1:]
    try:
        flags = estimate_flags(config, rest)
    except WanrlError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    # ours first: were a flag given twice (an abbreviation), the user's, later, wins
    command = [sys.executable, "-m", "wanrl_s3.cli", "estimate", *flags, *rest]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
