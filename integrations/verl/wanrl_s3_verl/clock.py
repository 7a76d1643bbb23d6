"""The learner's policy version, shared by name across a Ray cluster.

verl's fully-async trainer keeps its version (``current_param_version``) to
itself, and its MessageQueue clients live in other actors. The ``wanrl_s3``
backend's master rank advances this clock at every weight sync (the
``global_steps`` verl passes is that version), so the queue adapter on both
sides reads the same number: producers stamp samples with it, the consumer
judges them against it. A tiny actor with ``num_cpus=0``; created by the
adapter's launcher, found by name by everyone else.
"""

from __future__ import annotations

from typing import Any

import ray

CLOCK_NAME = "wanrl_s3_version_clock"
CLOCK_NAMESPACE = "wanrl_s3"


@ray.remote(num_cpus=0)
class VersionClock:
    """A version that only moves forward."""

    def __init__(self, version: int = 0) -> None:
        self._version = version

    def advance(self, version: int) -> int:
        self._version = max(self._version, int(version))
        return self._version

    def read(self) -> int:
        return self._version


def create_clock(name: str = CLOCK_NAME, version: int = 0) -> Any:
    """The named clock, created if it does not exist yet."""
    actor_class: Any = VersionClock  # a Ray actor class: .options() is Ray's, not typed
    return actor_class.options(name=name, namespace=CLOCK_NAMESPACE, get_if_exists=True).remote(
        version
    )


def find_clock(name: str = CLOCK_NAME) -> Any | None:
    """The named clock's handle, or None when nobody created one (or Ray is not running)."""
    if not ray.is_initialized():
        return None
    try:
        return ray.get_actor(name, namespace=CLOCK_NAMESPACE)
    except ValueError:
        return None


class ClockTicker:
    """The trainer master's side: advance the clock, if there is one, after each sync."""

    def __init__(self, name: str = CLOCK_NAME) -> None:
        self.name = name
        self._clock: Any | None = None

    def tick(self, version: int) -> None:
        if self._clock is None:
            self._clock = find_clock(self.name)
        if self._clock is not None:
            self._clock.advance.remote(version)  # fire and forget: never slows a sync
