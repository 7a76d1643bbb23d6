"""cost/learner.py: the learner's idle share when the fleet generates through the broadcast.

Every case is computed by hand from the module's formulas (binary-exact numbers
where possible): usable rate u = (1 - d) pool, banked b = min((1 - d) queue,
u T_train), wait per step w = max(0, batch - b) / u, version wait per
publication max(0, T_bcast - (S - kappa + 1)(T_train + w)).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wanrl_s3.cost import learner_idle
from wanrl_s3.cost.capacity import bubble_ratio
from wanrl_s3.errors import UsageError

# T_train 1 s, 100 trajectories a step, a publication every 2 steps, S = 3.
T, B, K, S = 1.0, 100, 2, 3


def test_plain_rate_matching_is_the_rules_bubble_without_a_broadcast() -> None:
    # 50 rollouts/s: 50 banked while training, the other 50 take 1 s: half the time idle.
    idle = learner_idle(T, B, K, S, 50.0)
    assert (idle.wait_per_step_s, idle.idle_share) == (1.0, 0.5)
    assert idle.idle_share == bubble_ratio(T, 0.0, K, B, 50.0)
    assert learner_idle(T, B, K, S, 100.0).idle_share == 0.0  # exactly enough
    assert learner_idle(T, B, K, S, 200.0).idle_share == 0.0


def test_drops_leave_only_the_admitted_rate() -> None:
    # 200 generated, half dropped: 100 admitted, enough. Three quarters dropped: 50, idle half.
    assert learner_idle(T, B, K, S, 200.0, dropped_fraction=0.5).idle_share == 0.0
    idle = learner_idle(T, B, K, S, 200.0, dropped_fraction=0.75)
    assert (idle.usable_rollouts_per_s, idle.wait_per_step_s, idle.idle_share) == (50.0, 1.0, 0.5)


def test_a_bounded_queue_banks_only_what_it_holds() -> None:
    # 200/s could bank 200 while training, but the queue holds 40: 60 more take 0.3 s.
    idle = learner_idle(T, B, K, S, 200.0, queue_rollouts=40)
    assert idle.banked_rollouts == 40.0
    assert math.isclose(idle.wait_per_step_s, 0.3)
    assert math.isclose(idle.idle_share, 0.6 / 2.6)
    # Half dropped: 20 of the 40 admissible, 80 more at 100/s: 0.8 s a step.
    idle = learner_idle(T, B, K, S, 200.0, queue_rollouts=40, dropped_fraction=0.5)
    assert (idle.banked_rollouts, idle.wait_per_step_s) == (20.0, 0.8)
    assert math.isclose(idle.idle_share, 1.6 / 3.6)
    # A queue larger than a step's output changes nothing.
    assert learner_idle(T, B, K, S, 50.0, queue_rollouts=1000).idle_share == 0.5


def test_a_version_that_comes_after_the_learner_needs_it_is_waited_for() -> None:
    # S = kappa + 1: the previous version stops being admissible 2 steps after a
    # publication; with no wait for trajectories that is 2 s.
    on_time = learner_idle(T, B, K, S, 200.0, t_bcast_s=2.0)
    assert (on_time.version_deadline_s, on_time.version_wait_s, on_time.idle_share) == (
        2.0, 0.0, 0.0,
    )  # fmt: skip
    late = learner_idle(T, B, K, S, 200.0, t_bcast_s=3.0)
    assert (late.version_wait_s, late.idle_share) == (1.0, 1.0 / 3.0)
    # A learner that waits for trajectories (1 s a step) needs the version later: 4 s.
    slow = learner_idle(T, B, K, S, 50.0, t_bcast_s=3.0)
    assert (slow.version_deadline_s, slow.version_wait_s, slow.idle_share) == (4.0, 0.0, 0.5)
    # A larger budget gives the broadcast more steps: S = 5 with kappa 2 is 4 steps.
    assert learner_idle(T, B, K, 5, 200.0, t_bcast_s=3.0).version_wait_s == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dropped_fraction": 1.0}, "dropped_fraction"),
        ({"dropped_fraction": -0.1}, "dropped_fraction"),
        ({"queue_rollouts": -1.0}, "queue_rollouts"),
        ({"t_bcast_s": float("nan")}, "t_bcast_s"),
    ],
)
def test_bad_inputs_are_one_line_usage_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        learner_idle(T, B, K, S, 100.0, **kwargs)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0.0, B, K, S, 1.0), "t_train_s"),
        ((T, 0, K, S, 1.0), "batch"),
        ((T, B, 3, 2, 1.0), "at least kappa"),
        ((T, B, K, S, 0.0), "pool_rollouts_per_s"),
    ],
)
def test_bad_shapes_are_refused(args: tuple, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        learner_idle(*args)


rates = st.floats(1.0, 1e4)
shares = st.floats(0.0, 0.95)


@given(rates, shares, st.floats(0.0, 1e3), st.floats(0.0, 10.0))
def test_idle_only_grows_with_drops_and_broadcast_and_shrinks_with_the_pool(
    pool: float, d: float, queue: float, t_bcast: float
) -> None:
    base = learner_idle(
        T, B, K, S, pool, dropped_fraction=d, queue_rollouts=queue, t_bcast_s=t_bcast
    )
    assert 0.0 <= base.idle_share < 1.0
    more_drops = learner_idle(
        T, B, K, S, pool, dropped_fraction=min(0.99, d + 0.01), queue_rollouts=queue,
        t_bcast_s=t_bcast,
    )  # fmt: skip
    later = learner_idle(
        T, B, K, S, pool, dropped_fraction=d, queue_rollouts=queue, t_bcast_s=t_bcast + 1.0
    )
    faster = learner_idle(
        T, B, K, S, 2 * pool, dropped_fraction=d, queue_rollouts=queue, t_bcast_s=t_bcast
    )
    # Monotone up to rounding: bound by a late version, the idle time per publication is
    # T_bcast - 2 T_train whatever the pool, so a faster pool may only tie.
    assert more_drops.idle_share >= base.idle_share - 1e-12
    assert later.idle_share >= base.idle_share - 1e-12
    assert faster.idle_share <= base.idle_share + 1e-12
