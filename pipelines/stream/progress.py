"""Liveness of a running stream: events/s, lag, the progress line, the live file, metrics.

The live file ``<lake>/bronze/stream_status/<source>.json`` is rewritten (atomically) about
once a second while the stream runs and once when it stops; ``binlake status`` reads it for
what a checkpoint cannot say (running or not, lag while idle). The same sample feeds
``--metrics-port`` (``metrics.py``). Correctness never depends on any of it: positions come
from the checkpoint rows only.

The progress line goes to stderr: on a terminal one line rewritten in place, elsewhere (a
pipe, ``tee``, a service's journal) a whole line every ``stream.log_interval`` seconds.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import sys
import time
from typing import Any, TextIO
from pipelines.config import STREAM_STATUS_DIR, lake_dir

__all__ = ["RateMeter", "ProgressLine", "Liveness", "live_path", "write_live", "read_live"]

STAGE_NAMES = ("bronze", "silver", "mirror", "gold")


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
    """The progress line on stderr (module docstring): on a terminal rewritten in place at
    most every ``every`` seconds; elsewhere a whole line, stamped with the UTC time, every
    ``interval`` seconds (0: none)."""

    def __init__(self, out: TextIO | None = None, *, every: float = 0.5,
                 interval: float = 10.0) -> None:
        self.out = out or sys.stderr
        self.enabled = bool(getattr(self.out, "isatty", lambda: False)())
        self.every = every
        self.interval = interval
        self._last: float | None = None
        self._width = 0

    def show(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        since = None if self._last is None else now - self._last
        if self.enabled and (force or since is None or since >= self.every):
            pad = max(self._width - len(text), 0)
            self._width = len(text)
            self._write("\r" + text + " " * pad)
        elif not self.enabled and self.interval and (since is None or since >= self.interval):
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._write(f"{stamp} {text}\n")
            # On the interval's grid (not from whenever the loop came by): a line late by a
            # heartbeat does not push every later one back.
            now = now if since is None or since >= 2 * self.interval else \
                self._last + self.interval
        else:
            return
        self._last = now

    def note(self, text: str, *, end: str = "\n") -> None:
        """``text`` on a line of its own (the terminal's progress line ended first)."""
        self.done()
        self._write(text + end)

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):  # a closed pipe must not stop the stream
            pass

    def done(self) -> None:
        if self.enabled and self._width:
            self._write("\n")
            self._width = 0


def live_path(lake_root: str, source_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source_id)
    return lake_dir(lake_root, STREAM_STATUS_DIR, f"{safe}.json")


def write_live(path: str, doc: dict[str, Any]) -> None:
    """Replace the live file atomically (write + rename); errors are ignored (best effort)."""
    from pipelines.errors import BinlakeError
    from pipelines.lake.files import write_lake_file

    doc = dict(doc, updated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    try:
        write_lake_file(None, path, json.dumps(doc, sort_keys=True, default=str).encode())
    except (OSError, BinlakeError):
        pass


def read_live(path: str) -> dict[str, Any] | None:
    """The live file (a path, or an ``s3://`` URL under an object-store lake), or None."""
    from pipelines.errors import BinlakeError
    from pipelines.lake.files import read_lake_file

    try:
        return json.loads(read_lake_file(path))
    except (OSError, ValueError, BinlakeError):
        return None


class Liveness:
    """What a running stream tells its operator: the progress line and the live file about
    once a second (:func:`write_live`), metrics (``--metrics-port``), from the position's
    counters, the committer's commits and the follower's stages. Best effort: nothing here
    affects correctness."""

    def __init__(self, path: str, *, source_id: str, server: str, pos, committer,
                 follower=None, line: ProgressLine | None = None) -> None:
        self.path = path
        self.source_id = source_id
        self.server = server  # host:port, never the DSN (it may carry a password)
        self.pos = pos  # StreamPosition
        self.committer = committer  # its .commits
        self.follower = follower  # its .stages, .lag(), .last_error
        self.line = line or ProgressLine()
        self.events, self.rows = RateMeter(), RateMeter()
        self.reconnects = 0
        self.error: tuple[float, str, str] | None = None  # bronze's last: epoch, stage, text
        self.latest: dict[str, Any] | None = None  # the last sample (metrics serve it)
        self.metrics = None  # MetricsServer
        self._shown = 0.0

    def lags(self, now: float | None = None) -> dict[str, float]:
        """Seconds each stage is behind the source: bronze's lag (``StreamPosition.lag``),
        plus, for a following stage, how long it has lacked a bronze commit."""
        bronze = self.pos.lag(time.time())
        now = time.monotonic() if now is None else now
        lags = {"bronze": bronze}
        for stage in self.follower.stages if self.follower else ():
            lags[stage] = bronze + self.follower.lag(stage, now)
        return {k: round(v, 3) for k, v in lags.items()}

    def positions(self) -> dict[str, str | None]:
        """Per stage, the binlog position ("file:pos") it holds: bronze's last commit; for a
        following stage, the bronze commit its last successful follow started from (None:
        none yet in this run)."""
        f = self.follower
        if f is None:
            return {}
        return {"bronze": f.bronze_at, **{s: f.positions.get(s) for s in f.stages}}

    def sample(self, state: str = "running") -> dict[str, Any]:
        """Everything the live file and the metrics say, taken now."""
        p, h = self.pos, self.pos.here
        errors = [e for e in (self.error, getattr(self.follower, "last_error", None)) if e]
        return {
            "state": state, "source": self.source_id, "lags": self.lags(),
            "positions": self.positions(),
            "file": h.file if h else None, "pos": h.pos if h else None,
            "gtid": str(h.gtid) if h else None, "events": p.events,
            "row_changes": p.row_changes, "commits": self.committer.commits,
            "events_per_second": round(self.events.sample(p.events), 1),
            "rows_per_second": round(self.rows.sample(p.row_changes), 1),
            "reconnects": self.reconnects, "error": max(errors) if errors else None,
        }

    def status_line(self, doc: dict[str, Any] | None = None) -> str:
        """The progress line of ``doc`` (a :meth:`sample`; default: one taken now)."""
        doc = doc or self.sample()
        where = f"{doc['file']}:{doc['pos']}" if doc["file"] is not None else "?"
        gtid = f" gtid {doc['gtid']}" if doc["gtid"] else ""
        behind = "".join(f" | {stage} lag {lag:.1f}s" for stage, lag in doc["lags"].items()
                         if stage != "bronze")
        return (f"stream {self.source_id} {where}{gtid} | {doc['events_per_second']:,.0f} ev/s "
                f"| lag {doc['lags']['bronze']:.1f}s | {doc['row_changes']:,} row changes | "
                f"{doc['commits']} commits{behind}")

    def tick(self) -> None:
        """Called after every event: shows and writes at most once a second."""
        now = time.monotonic()
        if now - self._shown < 1.0:
            return
        self._shown = now if now - self._shown >= 2.0 else self._shown + 1.0  # a 1 s grid
        doc = self.write("running")
        self.line.show(self.status_line(doc), force=True)

    def reconnecting(self, error: str) -> None:
        """The replication connection was lost (``error``): counted, shown, written."""
        self.reconnects += 1
        self.failed("bronze", error)
        self.write("reconnecting", error=error)

    def failed(self, stage: str, error: str) -> None:
        self.error = (time.time(), stage, error[:300])

    def write(self, state: str, error: str | None = None) -> dict[str, Any]:
        """The live file: ``state`` (running, reconnecting, stopped) and the counters; the
        sample it wrote (also what the metrics serve from now)."""
        doc = self.latest = self.sample(state)
        write_live(self.path, {
            "state": state, "pid": os.getpid(), "source_id": self.source_id,
            "mode": self.pos.mode, "file": doc["file"], "pos": doc["pos"], "gtid": doc["gtid"],
            "events_per_second": doc["events_per_second"],
            "lag_seconds": doc["lags"]["bronze"], "stage_lag_seconds": doc["lags"],
            "stage_positions": doc["positions"],
            "events": doc["events"], "row_changes": doc["row_changes"],
            "commits": doc["commits"], "error": error, "server": self.server,
        })
        return doc

    def serve(self, port: int | None) -> None:
        """Serve ``/metrics`` on ``port`` (None: not)."""
        if port is not None:
            from pipelines.stream.metrics import MetricsServer

            self.metrics = MetricsServer(port, lambda: self.latest)

    def done(self) -> None:
        self.line.done()
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
