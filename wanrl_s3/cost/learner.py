"""How long the learner waits when its fleet keeps generating through every broadcast.

The capacity rule (:mod:`.capacity`) sizes a fleet for the worst case: the
``kappa * batch`` trajectories of a publication window are generated after the
broadcast, so nothing made during it counts. A fleet of watchers keeps
generating under the version it holds while the next one downloads; the
broadcast then costs what it makes too old (the staleness filter's drops,
``d``) and, when a version reaches the fleet after the learner needs it, the
wait for that version. A bounded queue between the fleet and the learner adds
one more limit: while the learner trains, the fleet can bank only what the
queue holds, and then waits for room.

Steady state, per learner step, drops spread evenly over what arrives::

    usable rate   u = (1 - d) * pool
    banked        b = min((1 - d) * queue, u * T_train)       (no queue bound: u * T_train)
    wait          w = max(0, batch - b) / u

and per publication (every ``kappa`` steps). With the admission rule
``v >= v_t - S``, the previous version stops being admissible ``S - kappa + 1``
steps after a new one is published, so the new one must reach the fleet by then::

    version wait  v = max(0, T_bcast - (S - kappa + 1) * (T_train + w))
    idle share    = (kappa * w + v) / (kappa * (T_train + w) + v)

``T_bcast`` here runs from the end of the step that published the version to
fraction f of the fleet generating under it: the trainer's publish, the commit,
each worker's fetch and its wait for a batch boundary.

With no queue bound, nothing dropped and the broadcast in time, this is the
capacity rule's own bubble at ``T_bcast = 0``: plain rate matching.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import UsageError
from ..units import require_int, require_non_negative, require_positive
from .capacity import require_dropped_fraction, usable_rollouts_per_s


@dataclass(frozen=True)
class LearnerIdle:
    """The learner's waits, per step and per publication, and its idle share of wall clock."""

    usable_rollouts_per_s: float  # what the learner admits of the pool's rate
    banked_rollouts: float  # admissible trajectories waiting when a step starts gathering
    wait_per_step_s: float  # gathering a batch, beyond what was banked
    version_wait_s: float  # per publication: the new version came after it was needed
    version_deadline_s: float  # when it is needed, after its publication
    idle_share: float

    def to_dict(self) -> dict[str, float]:
        """Every field by name, for JSON."""
        return asdict(self)


def learner_idle(
    t_train_s: float,
    batch: int,
    kappa: int,
    staleness: int,
    pool_rollouts_per_s: float,
    *,
    dropped_fraction: float = 0.0,
    queue_rollouts: float | None = None,
    t_bcast_s: float = 0.0,
) -> LearnerIdle:
    """The learner's idle share (see the module doc for the derivation).

    ``pool_rollouts_per_s``: what the fleet generates while it has room to send,
    all workers together. ``queue_rollouts``: trajectories the fleet can bank
    while the learner trains (None: no bound). ``t_bcast_s``: from the end of the
    publishing step to fraction f of the fleet generating under the new version.
    """
    require_positive("t_train_s", t_train_s)
    require_int("batch", batch)
    require_int("kappa", kappa)
    require_int("staleness", staleness)
    if staleness < kappa:
        raise UsageError(
            f"staleness ({staleness}) must be at least kappa ({kappa}): with S < kappa the "
            "learner refuses a version before the next one is published"
        )
    d = require_dropped_fraction(dropped_fraction)
    require_non_negative("t_bcast_s", t_bcast_s)
    usable = usable_rollouts_per_s(pool_rollouts_per_s, d)
    banked = usable * t_train_s
    if queue_rollouts is not None:
        banked = min(banked, (1.0 - d) * require_non_negative("queue_rollouts", queue_rollouts))
    wait_s = max(0.0, batch - banked) / usable
    deadline_s = (staleness - kappa + 1) * (t_train_s + wait_s)
    version_wait_s = max(0.0, t_bcast_s - deadline_s)
    idle_s = kappa * wait_s + version_wait_s
    return LearnerIdle(
        usable_rollouts_per_s=usable,
        banked_rollouts=min(banked, float(batch)),
        wait_per_step_s=wait_s,
        version_wait_s=version_wait_s,
        version_deadline_s=deadline_s,
        idle_share=idle_s / (idle_s + kappa * t_train_s),
    )
