"""Liveness of a running stream: events/s, lag, the terminal progress line, the live file.

The live file ``<lake>/bronze/stream_status/<source>.json`` is rewritten (atomically) about
once a second while the stream runs and once when it stops; ``binlake status`` reads it for
what a checkpoint cannot say (running or not, lag while idle). Correctness never depends on
it: positions come from the checkpoint rows only.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import sys
import time
from typing import Any, TextIO

__all__ = ["RateMeter", "ProgressLine", "Liveness", "live_path", "write_live", "read_live"]


class RateMeter:
    """Events per second over the last ``window`` seconds."""

    def __init__(self, window: float = 5.0) -> None:
        self.window = window
        self._samples: collections.deque[tuple[float, int]] = collections.deque()

    def sample(self, total: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        self._samples.append((now, total))
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window:
            self._samples.popleft()
        t0, n0 = self._samples[0]
        return (total - n0) / (now - t0) if now > t0 else 0.0


class ProgressLine:
    """One self-overwriting status line on stderr, only when stderr is a terminal."""

    def __init__(self, out: TextIO | None = None, *, every: float = 0.5) -> None:
        self.out = out or sys.stderr
        self.enabled = bool(getattr(self.out, "isatty", lambda: False)())
        self.every = every
        self._last = 0.0
        self._width = 0

    def show(self, text: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        pad = max(self._width - len(text), 0)
        self._width = len(text)
        self.out.write("\r" + text + " " * pad)
        self.out.flush()

    def done(self) -> None:
        if self.enabled and self._width:
            self.out.write("\n")
            self.out.flush()
            self._width = 0


def live_path(lake_root: str, source_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source_id)
    return os.path.join(lake_root, "bronze", "stream_status", f"{safe}.json")


def write_live(path: str, doc: dict[str, Any]) -> None:
    """Replace the live file atomically (write + rename); errors are ignored (best effort)."""
    from pipelines.errors import BinlakeError
    from pipelines.lake_files import write_lake_file

    doc = dict(doc, updated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    try:
        write_lake_file(None, path, json.dumps(doc, sort_keys=True, default=str).encode())
    except (OSError, BinlakeError):
        pass


def read_live(path: str) -> dict[str, Any] | None:
    """The live file (a path, or an ``s3://`` URL under an object-store lake), or None."""
    from pipelines.errors import BinlakeError
    from pipelines.lake_files import read_lake_file

    try:
        return json.loads(read_lake_file(path))
    except (OSError, ValueError, BinlakeError):
        return None


class Liveness:
    """What a running stream tells the terminal and ``binlake status``: the progress line
    about once a second and the live file (:func:`write_live`), from the position's counters
    and the committer's commit count. Best effort: nothing here affects correctness."""

    def __init__(self, path: str, *, source_id: str, server: str, pos, committer,
                 line: ProgressLine | None = None) -> None:
        self.path = path
        self.source_id = source_id
        self.server = server  # host:port, never the DSN (it may carry a password)
        self.pos = pos  # StreamPosition
        self.committer = committer  # its .commits
        self.line = line or ProgressLine()
        self.meter = RateMeter()
        self._shown = 0.0

    def status_line(self, now: float | None = None) -> str:
        p, h = self.pos, self.pos.here
        where = f"{h.file}:{h.pos}" if h else "?"
        gtid = f" gtid {h.gtid}" if h and h.gtid else ""
        rate = self.meter.sample(p.events)
        return (f"stream {self.source_id} {where}{gtid} | {rate:,.0f} ev/s | lag "
                f"{p.lag(now or time.time()):.1f}s | {p.row_changes:,} row changes | "
                f"{self.committer.commits} commits")

    def tick(self) -> None:
        """Called after every event: shows and writes at most once a second."""
        now = time.monotonic()
        if now - self._shown < 1.0:
            return
        self._shown = now
        self.line.show(self.status_line(), force=True)
        self.write("running")

    def write(self, state: str, error: str | None = None) -> None:
        """The live file: ``state`` (running, reconnecting, stopped) and the counters."""
        p, h = self.pos, self.pos.here
        write_live(self.path, {
            "state": state, "pid": os.getpid(), "source_id": self.source_id, "mode": p.mode,
            "file": h.file if h else None, "pos": h.pos if h else None,
            "gtid": str(h.gtid) if h else None,
            "events_per_second": round(self.meter.sample(p.events), 1),
            "lag_seconds": round(p.lag(time.time()), 3), "events": p.events,
            "row_changes": p.row_changes, "commits": self.committer.commits, "error": error,
            "server": self.server,
        })

    def done(self) -> None:
        self.line.done()
