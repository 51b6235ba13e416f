"""The follow threads: silver, and what reads it (mirror, gold), run beside the stream's reader.

Run in the reader's own loop, a follow stopped the reading: while silver took ``d`` seconds no
event was read, bronze fell ``d`` behind the source, and a busy source's lag grew with every
follow (measured: silver's latency 7 s at the start of a 5k/s minute, 13 s at its end). On a
thread of its own the reader keeps reading and committing while a stage runs. Silver has a
thread, and the stages that read it (mirror, then gold, in order) another: each lane follows
on its own clock (``follower.py``), woken by a bronze commit or by silver's follow.

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
    """Follows bronze beside the reader, a thread per lane (module docstring)."""

    def __init__(self, follower: Follower, lock: threading.RLock,
                 save_files: Callable[[], None]) -> None:
        self.follower = follower
        self.lock = lock
        self.save_files = save_files
        self._stop = threading.Event()
        self._wake = {False: threading.Event(), True: threading.Event()}  # by lane: readers?
        self._threads: list[threading.Thread] = []
        self.follows = 0
        follower.on_silver = self._wake[True].set

    def start(self) -> None:
        if not self.follower.on or self._threads:
            return
        for readers in (False, True):
            if self.follower.lane(readers)[1]:
                self._threads.append(threading.Thread(
                    target=self._loop, args=(readers,), daemon=True,
                    name="binlake-follow-readers" if readers else "binlake-follow"))
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        """A commit was made: look at the clock again."""
        self._wake[False].set()

    def stop(self) -> None:
        """Stop looking; wait for running follows to end."""
        self._stop.set()
        for event in self._wake.values():
            event.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _loop(self, readers: bool) -> None:
        fresh, stages = self.follower.lane(readers)
        wake = self._wake[readers]
        while not self._stop.is_set():
            wait = fresh.wait_seconds(time.monotonic())
            if wait > 0:
                wake.wait(min(wait, _POLL))
                wake.clear()
                continue
            try:
                with self.lock:
                    if not readers:
                        self.save_files()  # silver reads the commits' entries in bronze/files
                    lacking = [s for s in self.follower.behind(waiting=True) if s in stages]
                    begun = self.follower.begin(lacking)
                if begun[0]:
                    self.follower.follow(begun=begun)
                    self.follows += 1
            except Exception as exc:  # noqa: BLE001 - following must not stop the stream
                log.warning("following bronze failed (tried again on the next commit): %s", exc)
                self._stop.wait(_POLL)
