"""Keeping a worker current: poll, prefetch in the background, install with a short pause.

A :class:`Watcher` polls LATEST with a conditional GET (``If-None-Match`` on its
ETag, so a poll with nothing new moves no data), at an interval with jitter so
a thousand workers do not poll in step. A new version is downloaded, verified
and decoded into host memory by a background thread while the caller's engine
keeps generating (invariant 7); :meth:`Watcher.install` then hands the newest
ready version to the engine, and that local apply is the only pause. A version
superseded while it downloads is abandoned for the newer one when finishing it
and then taking the delta would move more bytes than going straight there.

Before downloading, the watcher checks that the version is whole in its store
(:meth:`Subscriber.missing`). In a replica region, bucket replication can show
LATEST before the manifest, or a manifest before its payload; such a version
is not yet visible, which is not an error: the watcher logs it, waits with
exponential backoff and checks again. A version that stays invisible past
``invisible_grace_s`` is reported as an error (a pointer to a version that
does not exist, or replication that stalled), and a LATEST that changes again
is followed at once: one pointer the watcher could not follow never blocks the
next. :meth:`Watcher.switch` moves a watcher to another region's store (a
fallback), keeping the version it holds.

Neither background thread may die unseen: each catches every exception at its
top, logs it in one line, records it as :attr:`Watcher.failure` (the worker
writes it into its status object) and tries again with exponential backoff.
Only an exception that is not an ``Exception`` (``SystemExit`` raised in a
thread, say) ends a thread; :attr:`Watcher.alive` then turns false and
:meth:`Watcher.check_alive` raises, so that the process can exit.

With ``WatchConfig.host_cache_dir``, the watchers of one host download each version
once between them (:mod:`wanrl_s3.fetch.host_cache`) and map one shared copy.

The parts, one concern each: ``config`` (the settings and their backoffs),
``state`` (what a watcher holds and wants, under its lock), ``poll`` (reading
LATEST), ``visibility`` (is the version whole in this store yet), ``prefetch``
(the download of a version), ``failures`` (what failed, and how long to wait),
``result`` (what an install reports) and ``observer`` (the hooks metrics are
built on); ``watcher`` composes them.
"""

from .config import WatchConfig
from .failures import Failure
from .observer import WatchObserver
from .result import InstallResult, describe_source
from .visibility import wait_visible
from .watcher import Watcher

__all__ = [
    "Failure",
    "InstallResult",
    "WatchConfig",
    "WatchObserver",
    "Watcher",
    "describe_source",
    "wait_visible",
]
