"""``python -m wanrl_s3_verl.estimate RUN.yaml [key=value ...] [wanrl-s3 estimate flags]``.

Plans a verl run. RUN.yaml is composed by Hydra as ``main_ppo`` composes it, so it
may be a primary config such as this package's ``config/wanrl_s3.yaml`` (verl's
``ppo_trainer`` defaults fill what it does not set) or ``main_ppo ... --cfg job``
output, and the ``key=value`` overrides after it are ``main_ppo``'s. From it come
the batch (``data.train_batch_size`` x ``actor_rollout_ref.rollout.n``), the run
length (``trainer.total_training_steps``) and the parameter count (from the
``config.json`` of ``actor_rollout_ref.model.path``: a local directory, or a Hub id
found in the local Hugging Face cache, offline), passed to ``wanrl-s3 estimate`` as
``--batch``, ``--steps`` and ``--params``; one line on stderr says what was read.
A flag you pass yourself wins over the file; a value neither gives is an error that
names its key. Every other flag goes to ``wanrl-s3 estimate`` unchanged
(``--t-train-s`` is required there), so the table, ``--json``, ``--plot`` and the
exit codes are the command's own: this module only knows verl's keys, the planner
stays verl-free.

Needs Hydra (installed with the ``verl`` extra); verl is imported only where the
config extends verl's own (to find ``ppo_trainer``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from wanrl_s3.errors import UsageError, WanrlError

from .trainer_config import (
    BATCH_KEY,
    SAMPLES_KEY,
    STEPS_KEY,
    missing_model_message,
    read_verl_config,
)

PROG = "python -m wanrl_s3_verl.estimate"
USAGE = f"usage: {PROG} RUN.yaml [key=value ...] --t-train-s S [wanrl-s3 estimate flags]"


def _given(flag: str, argv: Sequence[str]) -> bool:
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in argv)


def split_overrides(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The Hydra overrides right after the file (``key=value``), and the flags after them."""
    overrides = []
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            break
        overrides.append(arg)
    return overrides, list(args[len(overrides) :])


def estimate_flags(
    config: str, argv: Sequence[str] = (), overrides: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """The ``wanrl-s3 estimate`` flags the verl config supplies, for those ``argv`` lacks,
    and where each came from (for the stderr line)."""
    run = read_verl_config(config, overrides)
    flags: list[str] = []
    said: list[str] = []
    if not _given("--params", argv):
        params = run.params
        if params is None:
            raise UsageError(missing_model_message(run, config))
        flags += ["--params", str(int(params))]
        said.append(f"--params {int(params)} ({run.model_config})")
    if not _given("--batch", argv):
        if run.batch is None:
            raise UsageError(
                f"{config}: {BATCH_KEY} is not set; set it ({BATCH_KEY}=N after the file) "
                "or pass --batch"
            )
        flags += ["--batch", str(run.batch)]
        said.append(
            f"--batch {run.batch} ({BATCH_KEY} {run.prompts} x {SAMPLES_KEY} {run.samples})"
        )
    if not _given("--steps", argv):
        if run.steps is None:
            said.append(f"{STEPS_KEY} not set: --steps keeps its default")
        else:
            flags += ["--steps", str(run.steps)]
            said.append(f"--steps {run.steps} ({STEPS_KEY})")
    return flags, said


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    if not args or args[0].startswith("-"):
        print(f"{PROG}: error: give the verl trainer YAML first; {USAGE}", file=sys.stderr)
        return UsageError.exit_code
    config = args[0]
    overrides, rest = split_overrides(args[1:])
    try:
        flags, said = estimate_flags(config, rest, overrides)
    except WanrlError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if said:
        print(f"{PROG}: from {config}: {'; '.join(said)}", file=sys.stderr, flush=True)
    # ours first: were a flag given twice (an abbreviation), the user's, later, wins
    command = [sys.executable, "-m", "wanrl_s3.cli", "estimate", *flags, *rest]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
