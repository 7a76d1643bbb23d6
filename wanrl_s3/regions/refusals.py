"""Copies the relay refused, and when it tries them again.

A copy that does not verify is most often a damaged primary (a payload object
flipped, replaced or truncated there): copying it again each pass would move
the whole version, and read it back, every poll interval until someone repairs
the primary. So a refused copy is remembered with the primary's payload ETags
it was made from. While they are unchanged, the relay waits 1, 2, 4, ... passes
(at most :data:`MAX_WAIT_PASSES`) before trying again, which still heals a copy
damaged in transit; as soon as any ETag changes (the primary was repaired or
re-published), it tries at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import VerificationError

#: The longest a refused copy of an unchanged primary waits, in passes (an hour at 5 s).
MAX_WAIT_PASSES = 720


class StillRefused(VerificationError):
    """A refused copy of an unchanged primary, not tried this pass. ``first``: the first
    pass of its wait (the relay logs that one; the rest of the wait says nothing new)."""

    def __init__(self, message: str, *, first: bool) -> None:
        super().__init__(message)
        self.first = first


@dataclass
class _Refused:
    etags: tuple[str, ...]
    error: VerificationError
    wait_passes: int
    waited: int = 0


class RefusedCopies:
    """Per (region, version): the refused copy, the primary's ETags it came from, the wait."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], _Refused] = {}

    def holds(self, region: str, version: int) -> bool:
        """Whether a copy of ``version`` to ``region`` was refused and not copied since."""
        return (region, version) in self._held

    def check(self, region: str, version: int, etags: tuple[str, ...]) -> None:
        """Raise StillRefused (a VerificationError), without copying, while a refused copy of
        the same primary payload waits; return (try the copy) once the wait is over or the
        primary changed."""
        held = self._held.get((region, version))
        if held is None or held.etags != etags or held.waited >= held.wait_passes:
            return
        held.waited += 1
        left = held.wait_passes - held.waited
        raise StillRefused(
            f"v{version}: not copied again: the primary's payload is unchanged since its copy "
            f"was refused ({held.error}); trying again in {left + 1} passes, or at once when "
            "the primary is repaired",
            first=held.waited == 1,
        ) from held.error

    def refused(
        self, region: str, version: int, etags: tuple[str, ...], error: VerificationError
    ) -> None:
        """Remember a copy that did not verify; an unchanged primary doubles the wait."""
        before = self._held.get((region, version))
        wait = 1 if before is None or before.etags != etags else 2 * before.wait_passes
        self._held[(region, version)] = _Refused(etags, error, min(wait, MAX_WAIT_PASSES))

    def copied(self, region: str, version: int) -> None:
        """A copy verified: forget its refusals."""
        self._held.pop((region, version), None)
