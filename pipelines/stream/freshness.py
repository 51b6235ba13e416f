"""When the stages that follow bronze (silver, then mirror and gold when on) must run so that
every bronze commit reaches them within ``stream.freshness_seconds``. Pure state, no I/O.

The stream runs them in its own loop, between events, so a follow that starts at ``t`` holds
every commit made before ``t`` and is visible at ``t + d`` (``d``: how long the follow takes).
A stage that lacks a commit made at ``c`` must therefore start by ``c + bound - d``; the loop
looks at least every ``tick`` seconds (an event, or the server's heartbeat while the source
is idle), so a follow is due from ``c + bound - d - tick``, ``d`` estimated as the longest of
the last few follows (the first one guessed at half the bound). Waiting until then rather
than following at every commit gathers a busy source's commits into few silver commits;
an idle source's last commit is followed on the same clock.

A stage that failed is tried again ``RETRY_SECONDS`` later (a dead gold server must not cost
a connection attempt every few seconds); the others keep their bound.
"""

from __future__ import annotations

import collections
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

    def committed(self, now: float, stages: Iterable[str]) -> None:
        """Bronze committed at ``now``: every stage lacks it (the oldest lack counts)."""
        for stage in stages:
            self.behind.setdefault(stage, now)

    @property
    def margin(self) -> float:
        """How long before a commit's bound a follow must start."""
        return max(self.runs) + self.tick

    def waiting(self, now: float) -> list[str]:
        """The stages behind bronze that may run now (not waiting out a failure)."""
        return [s for s in self.behind if now >= self.not_before.get(s, 0.0)]

    def due(self, now: float) -> bool:
        """Whether a follow must start now to keep the bound for some stage."""
        return any(now >= self.behind[s] + self.bound - self.margin for s in self.waiting(now))

    def ran(self, stage: str, ok: bool, now: float) -> None:
        """``stage`` ran (its follow started before any commit it lacks now: the loop
        commits nothing meanwhile): caught up, or failed and tried again later."""
        if ok:
            self.behind.pop(stage, None)
            self.not_before.pop(stage, None)
        else:
            self.not_before[stage] = now + RETRY_SECONDS

    def took(self, seconds: float) -> None:
        """A follow took ``seconds``: the estimate of the next one."""
        self.runs.append(seconds)

    def lag(self, stage: str, now: float) -> float:
        """Seconds ``stage`` has lacked a bronze commit (0: it holds them all)."""
        since = self.behind.get(stage)
        return 0.0 if since is None else max(0.0, now - since)
