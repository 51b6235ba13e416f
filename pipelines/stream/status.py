"""What ``binlake status`` shows of the stream: mode, position/GTID, events/s, lag, checkpoint.

Position and GTID state come from the latest CHECKPOINT row (what is committed); events/s,
lag and running/stopped from the live file the running stream rewrites every second
(``progress.py``), with each stage's lag behind the source and the binlog position it holds
(bronze: its last commit; silver, mirror, gold: the bronze commit their last follow held);
gaps from the stream's INCIDENT rows.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from pipelines.config import Config
from pipelines.lake.tables import Lake
from pipelines.stream.checkpoint import load_gaps, load_latest
from pipelines.stream.progress import live_path, read_live

__all__ = ["stream_status", "render_stream_status"]

_STALE_SECONDS = 30


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
        return True
    except (OSError, TypeError, ValueError):
        return False


def _age(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        at = dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    return (dt.datetime.now(dt.timezone.utc) - at).total_seconds()


def stream_status(spark, cfg: Config) -> dict[str, Any]:
    """A JSON-able summary of the stream of ``cfg.source.name`` (``{"state": "never run"}``
    when it never committed)."""
    lake = Lake.of(cfg)
    source = cfg.source.name
    ck = load_latest(spark, lake, source)
    live = read_live(live_path(cfg.lake_root, source)) or {}
    if ck is None and not live:
        return {"source_id": source, "state": "never run"}
    state = live.get("state", "unknown")
    age = _age(live.get("updated_at"))
    if state in ("running", "reconnecting") and (not _alive(live.get("pid"))
                                                  or (age is not None and age > _STALE_SECONDS)):
        state = "not running (killed?)"
    out: dict[str, Any] = {
        "source_id": source, "state": state, "server": live.get("server"),
        "mode": ck.mode if ck else live.get("mode"),
        "position": f"{ck.file}:{ck.pos}" if ck else None,
        "gtid": (ck.gtid or None) if ck else None,
        "read_position": (f"{live['file']}:{live['pos']}" if live.get("file") else None),
        "events_per_second": live.get("events_per_second", ck.events_per_second if ck else None),
        "lag_seconds": live.get("lag_seconds", ck.lag_seconds if ck else None),
        "stage_lag_seconds": live.get("stage_lag_seconds"),  # bronze, silver, mirror, gold
        "stage_positions": live.get("stage_positions"),  # stage → "file:pos" it holds
        "events": ck.events if ck else None,
        "row_changes": ck.row_changes if ck else None,
        "last_checkpoint": ({"seq": ck.seq, "at": ck.committed_at, "file": ck.file,
                             "pos": ck.pos, "last_gtid": ck.last_gtid} if ck else None),
        "live_updated_at": live.get("updated_at"),
        "error": live.get("error"),
        "gaps": load_gaps(spark, lake, source),
    }
    if state not in ("running", "reconnecting"):
        out["events_per_second"] = 0.0
    return out


def render_stream_status(st: dict[str, Any]) -> list[str]:
    """Text lines for ``binlake status``."""
    if st.get("state") == "never run":
        return [f"stream {st['source_id']}: never run"]
    lines = [f"stream {st['source_id']}: {st['state']}"
             + (f" from {st['server']}" if st.get("server") else "")
             + f", {st.get('mode')} mode"]
    ck = st.get("last_checkpoint")
    if ck:
        lines.append(f"  checkpoint #{ck['seq']} at {ck['file']}:{ck['pos']}"
                     + (f", gtid {st['gtid']}" if st.get("gtid") else "") + f" ({ck['at']})")
    lines.append(f"  {st.get('events_per_second') or 0:,.0f} events/s, lag "
                 f"{st.get('lag_seconds') or 0:.1f}s, {st.get('events') or 0:,} events and "
                 f"{st.get('row_changes') or 0:,} row changes streamed")
    lags = st.get("stage_lag_seconds") or {}
    at = dict(st.get("stage_positions") or {})
    if ck and not at.get("bronze"):
        at["bronze"] = f"{ck['file']}:{ck['pos']}"  # what bronze holds: its last checkpoint
    for stage, lag in lags.items():
        where = at.get(stage)
        lines.append(f"  {stage}: {lag:.1f}s behind the source, at "
                     + (where if where else "no follow yet in this run"))
    if st.get("error"):
        lines.append(f"  last error: {st['error']}")
    for g in st.get("gaps", []):
        lines.append(f"  GAP: {g.get('reason')}: skipped from {g.get('from')} to {g.get('to')} "
                     f"(recorded {g.get('recorded_at')})")
    return lines
