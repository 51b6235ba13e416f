"""The stream's commits: when a micro-batch is due, and the one Delta append that makes it
durable together with its CHECKPOINT row.

Exactly once rests on one fact: a commit is ONE append to ``bronze/binlog_events`` holding the
micro-batch's rows (complete transactions only, up to the position's boundary) and the
CHECKPOINT row naming that boundary. Delta makes the append all or nothing, so after a kill -9
the last CHECKPOINT in bronze is exactly where the rows end, and a restart reads on from it.
The files' progress (``bronze/files``, :class:`~pipelines.stream.files_state.StreamFiles`) is
written after the append; it only steers file mode, which a restart re-derives.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.errors import EngineError
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.stream.checkpoint import Checkpoint, checkpoint_batch
from pipelines.stream.files_state import StreamFiles
from pipelines.stream.position import StreamPosition, Where
from pipelines.vocabulary import CHANGE_TYPES

__all__ = ["Committer", "Identity"]



@dataclass(frozen=True)
class Identity:
    """Who streams what, written into every CHECKPOINT."""

    source_id: str
    server_uuid: str | None
    replica_server_id: int
    flavor: str = "mariadb"
    source_server_id: int | None = None


class Committer:
    """Commits micro-batches of one stream to the lake's bronze (module docstring)."""

    def __init__(self, spark, lake: Lake, files: StreamFiles, identity: Identity, *,
                 batch_rows: int, batch_interval_ms: int) -> None:
        self.spark = spark
        self.lake = lake
        self.files = files
        self.identity = identity
        self.batch_rows = batch_rows
        self.batch_interval_ms = batch_interval_ms
        self.started_at = dt.datetime.now(dt.timezone.utc)
        self.seq = 0  # the last CHECKPOINT's sequence number
        self.commits = 0
        self.events_at_commit = 0
        self.last_commit = time.monotonic()
        self.pending_gap: pa.RecordBatch | None = None  # a GAP row the next commit carries
        self.row_counts: dict[str, int] = {}  # row changes per file (this run + resumed file)
        self.closed_files: dict[str, int] = {}  # files whose END row awaits its commit

    # -- bookkeeping the loop reports ------------------------------------------------------
    def file_opened(self, name: str, row_changes: int) -> None:
        """``name`` is being streamed and already holds ``row_changes`` in bronze."""
        if name:
            self.row_counts[name] = row_changes

    def file_closed(self, name: str, end_pos: int) -> None:
        """``name`` ended (ROTATE or STOP) at ``end_pos``; the next commit completes it."""
        self.closed_files[name] = end_pos

    # -- deciding ----------------------------------------------------------------------------
    def due(self, batch_len: int, moved: bool, now: float) -> bool:
        """Commit now? At a boundary with ``batch_rows`` rows, or once the open batch (rows, a
        moved boundary or a gap) is ``batch_interval_ms`` old."""
        if batch_len >= self.batch_rows:
            return True
        pending = batch_len or moved or self.pending_gap is not None
        return bool(pending) and (now - self.last_commit) * 1000 >= self.batch_interval_ms

    # -- committing --------------------------------------------------------------------------
    def checkpoint(self, pos: StreamPosition, *, final: bool, now: float) -> Checkpoint:
        """The next CHECKPOINT for ``pos``'s boundary (pure)."""
        b = pos.boundary
        span = max(now - self.last_commit, 1e-6)
        ident = self.identity
        return Checkpoint(
            seq=self.seq + 1, mode=pos.mode, file=b.file, pos=b.pos, gtid=str(b.gtid),
            flavor=ident.flavor, replica_server_id=ident.replica_server_id,
            source_server_id=ident.source_server_id, last_gtid=pos.last_gtid,
            last_event_ts=pos.last_event_ts, events=pos.events, row_changes=pos.row_changes,
            events_per_second=round((pos.events - self.events_at_commit) / span, 1),
            lag_seconds=round(pos.lag(time.time()), 3),
            committed_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            run_started_at=self.started_at.isoformat(timespec="seconds"), stopped=final,
            last_ddl_file=pos.last_ddl[0] if pos.last_ddl else None,
            last_ddl_pos=pos.last_ddl[1] if pos.last_ddl else 0)

    def commit(self, rows: list[pa.RecordBatch], pos: StreamPosition, *,
               final: bool = False) -> bool:
        """Append ``rows`` (complete transactions) + a CHECKPOINT at ``pos.boundary`` in one
        Delta commit; return False when there was nothing to commit.

        Raises :class:`EngineError` when the append fails (nothing of it is visible then).
        """
        b = pos.boundary
        if b is None:
            return False
        rows = ([self.pending_gap] if self.pending_gap is not None else []) + list(rows)
        if not rows and not pos.moved:
            return False
        if not b.file:
            return False  # nothing streamed yet in GTID mode: no file to place a checkpoint in
        now = time.monotonic()
        ck = self.checkpoint(pos, final=final, now=now)
        self.seq = ck.seq
        ident = self.identity
        rows.append(checkpoint_batch(ck, source_id=ident.source_id,
                                     server_uuid=ident.server_uuid))
        table = pa.Table.from_batches(rows)
        try:
            self.lake.append(self.spark.createDataFrame(table), BRONZE_EVENTS)
        except Exception as exc:  # noqa: BLE001 - engines raise many kinds
            # Nothing of this batch is visible (one commit or none): a restart redoes it.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise EngineError(f"appending {table.num_rows} rows to "
                              f"{self.lake.where(BRONZE_EVENTS)} failed: {first}") from exc
        self.pending_gap = None
        pos.committed_boundary()
        self.commits += 1
        self.events_at_commit = pos.events
        self.last_commit = now
        self._record_files(table, b)
        return True

    def _record_files(self, table: pa.Table, b: Where) -> None:
        """The committed batch's files in ``<lake>/bronze/files`` (``files_state.py``)."""
        counts = self.row_counts
        kinds = table.column("event_type").to_pylist()
        for name, kind in zip(table.column("binlog_file").to_pylist(), kinds):
            if kind in CHANGE_TYPES:
                counts[name] = counts.get(name, 0) + 1
            else:
                counts.setdefault(name, 0)
        names = set(pc.unique(table.column("binlog_file")).to_pylist()) | {b.file}
        for name in names:
            if name in self.closed_files:
                self.files.completed(name, self.closed_files[name], counts.get(name, 0))
            elif name == b.file:
                self.files.streaming(name, b.pos, counts.get(name, 0))
            else:
                ends = table.filter(pc.equal(table.column("binlog_file"), name))
                self.files.streaming(name, int(pc.max(ends.column("end_pos")).as_py() or 0),
                                     counts.get(name, 0))
        if self.closed_files:
            self.closed_files = {}
            self.files.save()  # a finished file: file mode must skip it from now on
