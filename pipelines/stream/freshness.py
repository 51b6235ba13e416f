"""When the stages that follow bronze (silver, then mirror and gold when on) must run so that
every bronze commit reaches them within ``stream.freshness_seconds``. Pure state (behind a
lock: the reader commits on one thread while the follow thread reads and runs), no I/O.

The follow thread (``following.py``) runs them beside the reader, so bronze keeps committing
during a follow. A follow that :meth:`begins <Freshness.begin>` at ``t`` holds every commit
made before ``t`` and is visible at ``t + d`` (``d``: how long it takes); a commit made during
it is still lacking when it ends. A stage that lacks a commit made at ``c`` must therefore
start by ``c + bound - d``: a follow is due from ``c + bound - d - tick`` (``tick``: how late
the thread may look), ``d`` estimated as the longest of the last few follows (the first one
guessed at half the bound). Waiting until then rather than following at every commit
gathers a busy source's commits into few silver commits; an idle source's last commit is
followed on the same clock; a source busier than a follow is long has its follows back to
back.

A stage that failed is tried again ``RETRY_SECONDS`` later (a dead gold server must not cost
a connection attempt every few seconds); the others keep their bound.
"""

from __future__ import annotations

import collections
import threading
from typing import Iterable

__all__ = ["Freshness", "RETRY_SECONDS"]

RETRY_SECONDS = 30.0
_RUNS_KEPT = 5


class Freshness:
    """The follow deadlines of one stream's stages (module docstring). Times are
    ``time.monotonic()`` seconds."""

    def __init__(self, bound: float, *, tick: float) -> None:
        self.bound = bound
        self.tick = tick
        self.behind: dict[str, float] = {}  # stage → when the oldest commit it lacks was made
        self.not_before: dict[str, float] = {}  # stage → a failed stage's next try
        self.runs: collections.deque[float] = collections.deque([bound / 2], maxlen=_RUNS_KEPT)
        self.running: set[str] = set()  # stages of the follow begun and not ended
        self.during: dict[str, float] = {}  # running stage → its first commit made meanwhile
        self._lock = threading.RLock()

    def committed(self, now: float, stages: Iterable[str]) -> None:
        """Bronze committed at ``now``: every stage lacks it (the oldest lack counts)."""
        with self._lock:
            for stage in stages:
                self.behind.setdefault(stage, now)
                if stage in self.running:
                    self.during.setdefault(stage, now)

    @property
    def margin(self) -> float:
        """How long before a commit's bound a follow must start."""
        with self._lock:
            return max(self.runs) + self.tick

    def waiting(self, now: float) -> list[str]:
        """The stages behind bronze that may run now (not waiting out a failure)."""
        with self._lock:
            return [s for s in self.behind if now >= self.not_before.get(s, 0.0)]

    def due(self, now: float) -> bool:
        """Whether a follow must start now to keep the bound for some stage."""
        return self.wait_seconds(now) <= 0

    def wait_seconds(self, now: float) -> float:
        """How long until a follow is due (0: now; ``inf``: no stage lacks a commit, or all
        that do wait out a failure: a commit or the failure's retry time changes that)."""
        with self._lock:
            times = [self.behind[s] + self.bound - self.margin for s in self.waiting(now)]
            times += [t for s, t in self.not_before.items() if s in self.behind and t > now]
            return max(0.0, min(times) - now) if times else float("inf")

    def begin(self, stages: Iterable[str]) -> None:
        """A follow of ``stages`` starts: it holds every commit made before now."""
        with self._lock:
            for stage in stages:
                self.running.add(stage)
                self.during.pop(stage, None)

    def ran(self, stage: str, ok: bool, now: float) -> None:
        """``stage``'s follow ended: caught up with the commits made before it began (those
        made meanwhile it still lacks), or failed and tried again later."""
        with self._lock:
            since = self.during.pop(stage, None)
            if ok and stage in self.running and since is not None:
                self.behind[stage] = since
                self.not_before.pop(stage, None)
            elif ok:
                self.behind.pop(stage, None)
                self.not_before.pop(stage, None)
            else:
                self.not_before[stage] = now + RETRY_SECONDS
            self.running.discard(stage)

    def took(self, seconds: float) -> None:
        """A follow took ``seconds``: the estimate of the next one."""
        with self._lock:
            self.runs.append(seconds)

    def lag(self, stage: str, now: float) -> float:
        """Seconds ``stage`` has lacked a bronze commit (0: it holds them all)."""
        with self._lock:
            since = self.behind.get(stage)
        return 0.0 if since is None else max(0.0, now - since)
