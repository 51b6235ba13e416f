"""The follow thread: silver (then mirror and gold) run beside the stream's reader.

Run in the reader's own loop, a follow stopped the reading: while silver took ``d`` seconds no
event was read, bronze fell ``d`` behind the source, and a busy source's lag grew with every
follow (measured: silver's latency 7 s at the start of a 5k/s minute, 13 s at its end). On a
thread of its own the reader keeps reading and committing while a stage runs; the stages
still run one at a time, in order, on this one thread.

The reader and this thread share one lock: a bronze commit (its Delta append, its entries in
``bronze/files``, :meth:`Follower.committed`) is made whole under it, and a follow begins under
it (the files' entries saved, :meth:`Follower.begin`), so a follow holds exactly the commits
made before it began and :class:`~pipelines.stream.freshness.Freshness` counts the ones made
during it as still lacking. The thread sleeps until a follow is due
(:meth:`Freshness.wait_seconds`), woken early by a commit.

Stopping: :meth:`FollowThread.stop` lets a running follow end (stages are exactly once by
their own watermarks: cutting one short loses nothing, but two of one stage must never run
at once in one process, whose leases are re-entrant), then the stream's catch-up runs on
the main thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from pipelines.stream.follower import Follower

__all__ = ["FollowThread"]

log = logging.getLogger(__name__)

_POLL = 1.0  # the longest the thread sleeps without looking at the clock


class FollowThread:
    """Follows bronze beside the reader (module docstring)."""

    def __init__(self, follower: Follower, lock: threading.RLock,
                 save_files: Callable[[], None]) -> None:
        self.follower = follower
        self.lock = lock
        self.save_files = save_files
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.follows = 0

    def start(self) -> None:
        if not self.follower.on or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="binlake-follow", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A commit was made: look at the clock again."""
        self._wake.set()

    def stop(self) -> None:
        """Stop looking; wait for a running follow to end."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            wait = self.follower.fresh.wait_seconds(time.monotonic())
            if wait > 0:
                self._wake.wait(min(wait, _POLL))
                self._wake.clear()
                continue
            try:
                with self.lock:
                    self.save_files()  # silver reads the commits' entries in bronze/files
                    begun = self.follower.begin(self.follower.behind(waiting=True))
                if begun[0]:
                    self.follower.follow(begun=begun)
                    self.follows += 1
            except Exception as exc:  # noqa: BLE001 - following must not stop the stream
                log.warning("following bronze failed (tried again on the next commit): %s", exc)
                self._stop.wait(_POLL)
