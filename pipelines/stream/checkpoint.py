"""Stream checkpoints: rows of bronze itself, committed in the same Delta commit as their data.

Each micro-batch is one append to ``<lake>/bronze/binlog_events`` holding the batch's bronze
rows and, last, one ``CHECKPOINT`` row: ``binlog_file``/``start_pos`` = where the next
transaction starts (always a transaction boundary), ``row_in_event = -1`` (no row change
has it, so the bronze key stays unique), ``gtid`` = the last streamed transaction's GTID,
``event_timestamp`` = when the batch was committed, and ``query`` = the JSON of
:class:`Checkpoint` (mode, position, GTID state, counters). Data and checkpoint are visible
together or not at all, so after a SIGKILL the latest checkpoint row is exactly where the
committed data ends: resuming there neither loses nor repeats a change.

The latest checkpoint is the one with the highest ``seq`` (a counter carried across runs).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from pipelines.bronze.records import BRONZE_SCHEMA
from pipelines.lake.delta_ops import sql_string
from pipelines.lake.tables import BRONZE_EVENTS, Lake

__all__ = ["Checkpoint", "CHECKPOINT", "GAP_INCIDENT", "checkpoint_batch", "gap_batch",
           "load_latest", "load_gaps"]

CHECKPOINT = "CHECKPOINT"
GAP_INCIDENT = "stream_gap"  # INCIDENT rows the stream writes for purged binlogs it skipped


@dataclass
class Checkpoint:
    """Where a stream stands after a committed micro-batch (module docstring)."""

    seq: int
    mode: str  # position | gtid: how a restart asks the server to resume
    file: str
    pos: int
    gtid: str = ""  # GTID state streamed so far (MariaDB position / MySQL set), "" unknown
    flavor: str = "mariadb"
    replica_server_id: int = 0
    source_server_id: int | None = None
    last_gtid: str | None = None
    last_event_ts: int = 0  # header timestamp of the last event streamed
    events: int = 0  # events streamed, all runs
    row_changes: int = 0  # row changes streamed, all runs
    events_per_second: float = 0.0  # over the batch just committed
    lag_seconds: float = 0.0
    committed_at: str = ""
    run_started_at: str = ""
    stopped: bool = False  # written by a clean stop (SIGTERM/SIGINT, --stop-after)
    # Where the last DDL streamed (this run or an earlier one) ends: a schema snapshot is owed
    # until one is stored past it (``follower.Follower.snapshot_owed``).
    last_ddl_file: str | None = None
    last_ddl_pos: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def last_ddl(self) -> tuple[str, int] | None:
        return (self.last_ddl_file, self.last_ddl_pos) if self.last_ddl_file else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Checkpoint":
        data = json.loads(text)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _one_row(values: dict[str, Any]) -> pa.RecordBatch:
    row = {f.name: values.get(f.name) for f in BRONZE_SCHEMA}
    return pa.RecordBatch.from_pylist([row], schema=BRONZE_SCHEMA)


def _now_us() -> int:
    return int(dt.datetime.now(dt.timezone.utc).timestamp() * 1_000_000)


def checkpoint_batch(ck: Checkpoint, *, source_id: str, server_uuid: str | None) -> pa.RecordBatch:
    """The one-row bronze batch carrying ``ck`` (append it to the batch it covers)."""
    return _one_row({
        "source_id": source_id, "server_id": ck.source_server_id, "server_uuid": server_uuid,
        "binlog_file": ck.file, "start_pos": ck.pos, "end_pos": ck.pos, "row_in_event": -1,
        "event_timestamp": _now_us(), "event_type": CHECKPOINT, "gtid": ck.last_gtid,
        "trx_pos": ck.pos, "query": ck.to_json(),
    })


def gap_batch(*, source_id: str, server_uuid: str | None, file: str, pos: int,
              detail: dict[str, Any]) -> pa.RecordBatch:
    """An INCIDENT row recording binlogs the stream skipped (``binlake status`` shows it)."""
    return _one_row({
        "source_id": source_id, "server_uuid": server_uuid, "binlog_file": file,
        "start_pos": pos, "end_pos": pos, "row_in_event": -2, "event_timestamp": _now_us(),
        "event_type": "INCIDENT", "trx_pos": pos,
        "query": json.dumps({"incident": GAP_INCIDENT, **detail}, sort_keys=True),
    })


def load_latest(spark, lake: Lake, source_id: str) -> Checkpoint | None:
    """The latest checkpoint of ``source_id`` (highest ``seq``), ``None`` before the first."""
    if not lake.exists(spark, BRONZE_EVENTS):
        return None
    rows = (lake.read(spark, BRONZE_EVENTS)
            .where(f"event_type = '{CHECKPOINT}' AND source_id = {sql_string(source_id)}")
            .select("query").collect())
    best = None
    for r in rows:
        ck = Checkpoint.from_json(r["query"])
        if best is None or ck.seq > best.seq:
            best = ck
    return best


def load_gaps(spark, lake: Lake, source_id: str) -> list[dict[str, Any]]:
    """The gaps the stream recorded, oldest first (file, position, JSON details)."""
    if not lake.exists(spark, BRONZE_EVENTS):
        return []
    rows = (lake.read(spark, BRONZE_EVENTS)
            .where(f"event_type = 'INCIDENT' AND source_id = {sql_string(source_id)} "
                   "AND row_in_event = -2")
            .select("binlog_file", "start_pos", "event_timestamp", "query").collect())
    out = []
    for r in sorted(rows, key=lambda r: r["event_timestamp"]):
        out.append({"binlog_file": r["binlog_file"], "start_pos": r["start_pos"],
                    "recorded_at": str(r["event_timestamp"]), **json.loads(r["query"])})
    return out
