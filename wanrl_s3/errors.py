"""The one error hierarchy of wanrl-s3.

Every error the library raises derives from :class:`WanrlError` *and* from the
builtin that matches its meaning, so callers can catch either ``WanrlError`` or
the builtin they already handle (``ValueError``, ``FileExistsError`` ...).
Each class carries the process exit code that the CLI uses for it, so the
mapping from failure to exit status lives in one place.

Exit codes (also documented in the README):

==== ==========================================================
0    success
1    an unexpected internal error (a bug: please report it)
2    bad usage or input (flags, files, a version that does not exist), or a local
     destination that cannot take the file (disk full, quota, read-only, no permission)
3    verification failure (hash mismatch, malformed or unsigned manifest, bad status object)
4    version conflict (the version exists, or LATEST is newer)
5    infeasible plan (the planner's feasibility gate)
6    the store could not be reached or failed an I/O request
7    a fetch was cancelled (a newer version made it moot, or the process is stopping)
8    the store does not keep a guarantee the protocol relies on (`wanrl-s3 doctor` says which)
==== ==========================================================
"""

from __future__ import annotations


class WanrlError(Exception):
    """Base class of every error raised by wanrl-s3."""

    exit_code: int = 1


class UsageError(WanrlError, ValueError):
    """Bad arguments or input files: the caller can fix it."""

    exit_code = 2


class SigningKeyError(UsageError):
    """A signing key that cannot be used: unreadable, malformed, or of the wrong kind.

    Raised where the key is loaded, before anything is signed or fetched, with a
    message that names the key (its flag or file) and how to make a right one.
    """


class NotFoundError(WanrlError, FileNotFoundError):
    """A version, object or file that was asked for does not exist."""

    exit_code = 2

    def __str__(self) -> str:  # FileNotFoundError's repr-style str is noisy
        return str(self.args[0]) if self.args else "not found"


class LocalIOError(WanrlError, OSError):
    """A local file could not be written or read: disk full, quota, read-only, permission.

    Exit code 2 like any other bad file argument: the fix (free space, another
    ``--out``) is on the caller's side, and retrying unchanged cannot help. It is
    an ``OSError`` with the original ``errno``, so callers can still tell ENOSPC
    from EACCES.
    """

    exit_code = 2

    @classmethod
    def wrap(cls, what: str, exc: OSError) -> LocalIOError:
        """``what`` (the file and the action) with the system's reason, errno kept."""
        return cls(exc.errno, f"{what}: {exc.strerror or exc}")

    def __str__(self) -> str:  # OSError's "[Errno 28] ..." prefix is noise on a CLI line
        return str(self.strerror or (self.args[0] if self.args else "local I/O error"))


class VerificationError(WanrlError, ValueError):
    """Stored bytes do not match what the manifest promises."""

    exit_code = 3


class ManifestError(VerificationError):
    """A manifest (or LATEST pointer) is malformed; the message names the field."""


class ObjectTooLargeError(VerificationError):
    """An object is larger than its reader accepts; refused having read one byte past the limit.

    Anyone who can write a bucket can make an object of any size; a reader
    that took it whole before checking its size could be run out of memory.
    """


class WorkerStatusError(VerificationError):
    """A worker's status object is malformed, or is not a status object at all.

    Not a usage error: the reader passed nothing wrong, the bytes a worker (or
    something else) wrote under ``workers/`` are bad. Readers of the whole fleet
    skip such an object so that one broken worker cannot hide the others.
    """


class SignatureError(VerificationError):
    """A manifest is unsigned where a signature is required, or its signature is forged."""


class VersionConflictError(WanrlError, FileExistsError):
    """The version is already claimed, or LATEST already points past it."""

    exit_code = 4

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "version conflict"


class InfeasiblePlanError(WanrlError, ValueError):
    """The capacity rule's gate: no fleet size removes the learner bubble."""

    exit_code = 5


class StoreError(WanrlError, OSError):
    """The object store failed a request that retries did not fix."""

    exit_code = 6

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "store error"


class TransientStoreError(StoreError):
    """A request failed in a way that is worth retrying (connection reset, 5xx, timeout)."""


class ThrottledError(TransientStoreError):
    """The store asked its clients to slow down (S3's 503 SlowDown, a 429): worth retrying,
    after a longer wait than another transient failure (``RetryPolicy.throttled_*``)."""


class PreconditionFailedError(StoreError):
    """A conditional write lost its race (If-None-Match / If-Match did not hold).

    Internal to the commit protocol; the publisher turns it into
    :class:`VersionConflictError` with a message that names the version.
    """


class PublicationFailedError(WanrlError, RuntimeError):
    """A background publication failed in a way that must stop the run.

    Raised ``from`` its cause by the failed publication's future and, unless the
    future raised it first, by the trainer's next submit or close
    (:class:`wanrl_s3.TrainerPublisher`). The exit code is the cause's.
    """

    @classmethod
    def of(cls, version: int, cause: BaseException) -> PublicationFailedError:
        """The failure of ``version``'s publication, naming the cause (set ``from`` it)."""
        error = cls(
            f"wanrl_s3: the background publication of v{version} failed: "
            f"{type(cause).__name__}: {cause}"
        )
        error.exit_code = cause.exit_code if isinstance(cause, WanrlError) else 1
        error.__cause__ = cause
        return error


class StoreGuaranteeError(StoreError):
    """The store answers, but does not keep a guarantee the protocol relies on.

    Conditional writes ignored, stale reads or listings, ranges ignored: found
    by ``wanrl-s3 doctor``, or by the publisher's check before its first write
    to a store. Retrying cannot help; another store, endpoint or setting can.
    """

    exit_code = 8


class FetchCancelled(WanrlError):
    """A fetch abandoned through its cancel event (a newer version made it moot).

    Not a failure of the store or of the bytes: the caller asked for it. The CLI
    never shows it to a user except when a worker is stopped mid-download.
    """

    exit_code = 7


__all__ = [
    "FetchCancelled",
    "InfeasiblePlanError",
    "LocalIOError",
    "ManifestError",
    "NotFoundError",
    "ObjectTooLargeError",
    "PreconditionFailedError",
    "PublicationFailedError",
    "SignatureError",
    "SigningKeyError",
    "StoreError",
    "StoreGuaranteeError",
    "ThrottledError",
    "TransientStoreError",
    "UsageError",
    "VerificationError",
    "VersionConflictError",
    "WanrlError",
    "WorkerStatusError",
]


def __dir__() -> list[str]:
    return sorted(__all__)  # the public names, not the submodules
