"""``binlake stream``: follow a live server as a replica into bronze, exactly once.

Flow: check the source (``source.py``), find where to start (the latest checkpoint; start
flags only on a first run or with ``reset``), detect purged binlogs, then read the dump
(``protocol.py``) event by event through file mode's decoder and row builder. At each
transaction boundary (XID, COMMIT, a standalone DDL) the micro-batch may be committed: its
rows and a CHECKPOINT row in ONE Delta append (``checkpoint.py``). Silver (and gold when
configured) follow every ``stream.silver_lag_seconds``; after a batch holding DDL a schema
snapshot is taken through the source.

Failure model: SIGKILL at any moment loses only uncommitted work, which the restart reads
again from the checkpoint; SIGTERM/SIGINT cut the micro-batch back to the last boundary,
commit it and stop (exit 0). A dropped connection is retried with exponential backoff from
the last boundary. A decoding error commits what is complete, then stops (exit 1).
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import struct
import threading
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bronze import events as ev
from pipelines.bronze.parser import BinlogParser, ChecksumPolicy
from pipelines.config import Config, Dsn
from pipelines.delta_ops import sql_string
from pipelines.errors import ConfigError, DecodeError, EngineError, SourceError
from pipelines.lake import BRONZE_EVENTS, Lake
from pipelines.silver.snapshot_source import is_ddl_event, refusals
from pipelines.stream.batch import MicroBatch
from pipelines.stream.checkpoint import Checkpoint, checkpoint_batch, gap_batch, load_latest
from pipelines.stream.files_state import StreamFiles
from pipelines.stream.gtid import GtidState
from pipelines.stream.progress import ProgressLine, RateMeter, live_path, write_live
from pipelines.stream.protocol import (
    BinlogGone, ConnectionLost, ReplicationConnection, StartAt, StreamEvent,
)
from pipelines.stream.source import Gap, SourceServer, binlog_number

__all__ = ["run_stream", "StreamJob"]

log = logging.getLogger(__name__)

_E = ev.EventType
_HEARTBEATS = frozenset({_E.HEARTBEAT, _E.HEARTBEAT_V2})


@dataclass
class _Where:
    """A place in the stream: file, position of the next event, GTID state up to there."""

    file: str
    pos: int
    gtid: GtidState

    def copy(self) -> "_Where":
        return _Where(self.file, self.pos, self.gtid.copy())


def run_stream(spark, cfg: Config, *, source_dsn: str, server_id: int,
               start_file: str | None = None, start_pos: int | None = None,
               start_gtid: str | None = None, gold_dsn: str | None = None, reset: bool = False,
               gap_fill: bool = True, stop_after: float | None = None,
               mirror: bool = False) -> int:
    """Stream ``source_dsn`` into the lake until stopped; return the exit code.

    ``stop_after`` (seconds) stops cleanly after that long (tests, benchmarks). Raises
    :class:`ConfigError` for contradictory flags and :class:`SourceError` when the source
    is refused (checks, grants, a gap with ``gap_fill=False``) or unreachable at start.
    """
    if start_gtid and (start_file or start_pos):
        raise ConfigError("--start-gtid excludes --start-file/--start-pos")
    if start_pos is not None and not start_file:
        raise ConfigError("--start-pos needs --start-file")
    if server_id < 1 or server_id > 0xFFFFFFFF:
        raise ConfigError(f"--server-id: expected 1..4294967295, got {server_id}")
    dsn = Dsn.parse(source_dsn, setting="--source-dsn")
    job = StreamJob(spark, cfg, dsn=dsn, server_id=server_id,
                    gold_dsn=gold_dsn or cfg.gold.dsn or None, gap_fill=gap_fill,
                    stop_after=stop_after)
    job.mirror = mirror  # `--mirror`: the typed mirror tables follow silver
    return job.run(start=_flags(start_file, start_pos, start_gtid), reset=reset)


def _flags(file: str | None, pos: int | None, gtid: str | None) -> StartAt | None:
    if gtid:
        return StartAt(gtid=gtid)
    if file:
        return StartAt(file, pos or 4)
    return None


class StreamJob:
    """One run of the stream (see the module docstring); :meth:`run` drives it."""

    def __init__(self, spark, cfg: Config, *, dsn: Dsn, server_id: int,
                 gold_dsn: str | None = None, gap_fill: bool = True,
                 stop_after: float | None = None) -> None:
        self.spark = spark
        self.cfg = cfg
        self.dsn = dsn
        self.server_id = server_id
        self.gold_dsn = gold_dsn
        self.gap_fill = gap_fill
        self.stop_after = stop_after
        self.mirror = False
        self.source_id = cfg.source.name
        self.server_uuid = cfg.source.server_uuid or None
        self.lake = Lake.of(cfg)
        self.src = SourceServer(dsn)
        self.files = StreamFiles(spark, self.lake, self.source_id,
                                 f"stream://{dsn.host}:{dsn.port}")
        self.stop_requested = threading.Event()
        self.progress = ProgressLine()
        self.meter = RateMeter()
        self.live = live_path(cfg.lake_root, self.source_id)
        # stream state
        self.mode = "position"
        self.seq = 0
        self.here: _Where | None = None  # after the last event read
        self.boundary: _Where | None = None  # after the last complete transaction
        self.committed: tuple[str, int] | None = None
        self.trx_gtid: str | None = None
        self.last_gtid: str | None = None
        self.last_event_ts = 0
        self.events = 0
        self.row_changes = 0
        self.events_at_commit = 0
        self.batch_started = time.monotonic()
        self.last_commit = time.monotonic()
        self.last_silver = time.monotonic()
        self.silver_pending = False
        self.ddl_pending = False
        self.caught_up = False
        self.takeover_pending = False
        self.pending_gap: pa.RecordBatch | None = None
        self.parser: BinlogParser | None = None
        self.mb: MicroBatch | None = None
        self.flavor = "mariadb"
        self.source_server_id: int | None = None
        self.started_at = dt.datetime.now(dt.timezone.utc)
        self.commits = 0
        self.failures = 0
        self.row_counts: dict[str, int] = {}  # row changes per file (this run + resumed file)
        self.closed_files: dict[str, int] = {}  # files whose END row awaits its commit
        self._marked = (0, 0)  # (events, row_changes) at the last boundary

    # -- start-up -----------------------------------------------------------------------------
    def _validate(self) -> None:
        self.src.load()
        self.flavor = "mariadb" if self.src.is_mariadb else "mysql"
        self.source_server_id = self.src.server_id
        checks = self.src.checks(self.server_id)
        for c in checks:
            if c.level == "warn":
                log.warning("source check %s: %s", c.name, c.detail)
        refused = refusals(checks)
        if refused:
            raise SourceError("refusing to stream from this source: " + "; ".join(
                f"{c.name}: {c.detail}" for c in refused))

    def _bronze_files(self) -> list[str]:
        if not self.lake.exists(self.spark, BRONZE_EVENTS):
            return []
        rows = (self.lake.read(self.spark, BRONZE_EVENTS)
                .where(f"source_id = {sql_string(self.source_id)}")
                .select("binlog_file").distinct().collect())
        return [r[0] for r in rows]

    def _rows_beyond(self, ck: Checkpoint) -> int:
        """Bronze rows of this source past the checkpoint (someone else wrote them)."""
        if not self.lake.exists(self.spark, BRONZE_EVENTS):
            return 0
        f = sql_string(ck.file)
        return (self.lake.read(self.spark, BRONZE_EVENTS)
                .where(f"source_id = {sql_string(self.source_id)} AND row_in_event >= 0 AND "
                       f"((binlog_file = {f} AND start_pos >= {int(ck.pos)}) OR binlog_file > {f})")
                .count())

    def _takeover(self, first_file: str) -> None:
        """Make the stream the only writer of ``first_file`` and later files of this source:
        drop their bronze partitions (metadata only) and their file-mode progress rows."""
        key = binlog_number(first_file)
        names = {n for n in self._bronze_files() if binlog_number(n) >= key}
        if names:
            log.warning("stream takes over %s: their bronze rows are replaced by streamed ones",
                        ", ".join(sorted(names)))
            in_list = ", ".join(sql_string(n) for n in sorted(names))
            self.lake.delete_where(self.spark, BRONZE_EVENTS,
                                   f"source_id = {sql_string(self.source_id)} AND binlog_file IN ({in_list})")
        self.files.forget(names | {first_file})

    def _default_start(self) -> StartAt:
        """No checkpoint and no flags: after the last file file mode completed, else the oldest
        binlog the server has."""
        logs = [name for name, _ in self.src.binary_logs()]
        if not logs:
            raise SourceError(f"{self.dsn.host}:{self.dsn.port}: the server lists no binlogs")
        done = sorted((st.binlog_file for (s, _), st in self.files.states().items()
                       if s == self.source_id and st.status == "completed"), key=binlog_number)
        if done:
            later = [n for n in logs if binlog_number(n) > binlog_number(done[-1])]
            if later:
                return StartAt(later[0], 4)
        return StartAt(logs[0], 4)

    def _file_row_changes(self, name: str) -> int:
        if not self.lake.exists(self.spark, BRONZE_EVENTS):
            return 0
        return (self.lake.read(self.spark, BRONZE_EVENTS)
                .where(f"source_id = {sql_string(self.source_id)} AND binlog_file = "
                       f"{sql_string(name)} AND event_type IN ('INSERT', 'UPDATE', 'DELETE')")
                .count())

    def _plan(self, flags: StartAt | None, reset: bool) -> StartAt:
        ck = None if reset else load_latest(self.spark, self.lake, self.source_id)
        if ck is not None:
            self.seq = ck.seq
            self.events, self.row_changes = ck.events, ck.row_changes
            self.last_gtid = ck.last_gtid
            self.mode = ck.mode
            if flags is not None:
                log.warning("a checkpoint exists (%s:%d): start flags are ignored (use --reset)",
                            ck.file, ck.pos)
            start = StartAt(ck.file, ck.pos, gtid=(ck.gtid or None) if ck.mode == "gtid" else None)
            self.here = _Where(ck.file, ck.pos,
                               GtidState.parse(ck.gtid, mariadb=self.src.is_mariadb))
            self.committed = (ck.file, ck.pos)
            if self._rows_beyond(ck):
                log.warning("bronze holds rows of %s past the checkpoint %s:%d (written by file "
                            "mode?): streaming the file again from its start", self.source_id,
                            ck.file, ck.pos)
                self._takeover(ck.file)
                start = StartAt(ck.file, 4)
                self.mode = "position"
                self.here = _Where(ck.file, 4, GtidState.parse(
                    self.src.gtid_at(ck.file, 4) or "", mariadb=self.src.is_mariadb))
                self.committed = None
            return start
        if reset:
            old = load_latest(self.spark, self.lake, self.source_id)
            self.seq = old.seq if old is not None else 0
        start = flags or self._default_start()
        self.mode = start.mode
        if start.gtid:
            self.here = _Where("", 4, GtidState.parse(start.gtid, mariadb=self.src.is_mariadb))
            self.takeover_pending = True
        else:
            if start.pos > 4:
                log.warning("starting inside %s at %d: rows before it in that file are not "
                            "streamed", start.file, start.pos)
            self._takeover(start.file)
            self.here = _Where(start.file, start.pos, GtidState.parse(
                self.src.gtid_at(start.file, start.pos) or "", mariadb=self.src.is_mariadb))
        return start

    def _check_gap(self, want: StartAt) -> StartAt:
        gap = self.src.find_gap(want, self.here.gtid if want.gtid else None)
        if gap is None:
            return want
        return self._fill_gap(gap)

    def _fill_gap(self, gap: Gap) -> StartAt:
        if not self.gap_fill:
            raise SourceError(f"binlogs are missing on the server: {gap.reason}; refusing to "
                              "skip them (--no-gap-fill)")
        log.warning("GAP: %s; skipping ahead to %s and recording the gap", gap.reason, gap.resume)
        resume = StartAt(gap.resume.file, gap.resume.pos,
                         gtid=gap.resume.gtid if self.mode == "gtid" else None)
        detail = {"reason": gap.reason, "from": str(gap.wanted), "to": str(gap.resume),
                  "last_gtid": self.last_gtid}
        self.pending_gap = gap_batch(source_id=self.source_id, server_uuid=self.server_uuid,
                                     file=gap.resume.file, pos=gap.resume.pos, detail=detail)
        gtid = GtidState.parse(gap.resume.gtid or self.src.gtid_at(gap.resume.file, 4) or "",
                               mariadb=self.src.is_mariadb)
        self._takeover(gap.resume.file)
        self.here = _Where(gap.resume.file, gap.resume.pos, gtid)
        self.boundary = self.here.copy()
        self._new_batch(gap.resume.file, 0)
        return resume

    def _new_batch(self, file: str, row_changes: int | None = None) -> None:
        if row_changes is None:
            row_changes = self._file_row_changes(file) if file else 0
        if file:
            self.row_counts[file] = row_changes
        self.mb = MicroBatch(source_id=self.source_id, server_uuid=self.server_uuid,
                             batch_rows=self.cfg.bronze.batch_rows, binlog_file=file,
                             row_changes=row_changes)
        self.parser = BinlogParser(file=file or "<stream>",
                                   checksum=ChecksumPolicy(self.cfg.bronze.checksum))

    # -- the run ------------------------------------------------------------------------------
    def run(self, *, start: StartAt | None = None, reset: bool = False) -> int:
        restore = self._install_signals()
        try:
            return self._run(start, reset)
        finally:
            self.progress.done()
            restore()
            self.src.close()

    def _run(self, flags: StartAt | None, reset: bool) -> int:
        self._validate()
        want = self._plan(flags, reset)
        self.boundary = self.here.copy()
        self._new_batch(self.here.file)
        want = self._check_gap(want)
        log.info("streaming %s from %s (%s mode)", self.source_id, want, self.mode)
        deadline = time.monotonic() + self.stop_after if self.stop_after else None
        conn = ReplicationConnection(self.dsn, self.server_id, is_mariadb=self.src.is_mariadb,
                                     heartbeat=float(self.cfg.stream.heartbeat_seconds),
                                     read_timeout=float(self.cfg.stream.read_timeout_seconds))
        code = 0
        try:
            while not self.stop_requested.is_set():
                try:
                    conn.open(self._resume_point())
                    self._pump(conn, deadline)
                except BinlogGone as exc:
                    self._rollback()
                    self._commit()  # complete transactions first: the gap starts after them
                    gap = self.src.find_gap(self._resume_point(), self.boundary.gtid)
                    if gap is None:
                        raise SourceError(str(exc)) from None
                    self._fill_gap(gap)
                except ConnectionLost as exc:
                    self._rollback()
                    self.failures += 1
                    limit = self.cfg.stream.reconnect_attempts
                    if limit and self.failures > limit:
                        raise SourceError(f"{exc} (gave up after {limit} reconnects)") from None
                    wait = min(2 ** (self.failures - 1), self.cfg.stream.reconnect_max_seconds)
                    log.warning("%s; reconnecting in %ss", exc, wait)
                    self._live("reconnecting", error=str(exc))
                    self.stop_requested.wait(wait)
        except DecodeError as exc:
            log.error("decoding stopped the stream: %s", exc)
            self._rollback()
            code = 1
        finally:
            conn.close()
        self._commit(final=True)
        self.files.save()
        self._live("stopped")
        return code

    def _resume_point(self) -> StartAt:
        b = self.boundary
        if self.mode == "gtid":
            return StartAt(b.file or None, b.pos, gtid=str(b.gtid) or None)
        return StartAt(b.file, b.pos)

    def _rollback(self) -> None:
        """Forget everything after the last transaction boundary (the server re-sends it)."""
        self.mb.rollback()
        self.here = self.boundary.copy()
        self.events, self.row_changes = self._marked
        self.trx_gtid = None
        self.parser = BinlogParser(file=self.here.file or "<stream>",
                                   checksum=ChecksumPolicy(self.cfg.bronze.checksum))

    def _pump(self, conn: ReplicationConnection, deadline: float | None) -> None:
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                self.stop_requested.set()
            if self.stop_requested.is_set():
                self._rollback()
                return
            se = conn.read()
            if se is None:
                raise ConnectionLost("the server ended the binlog dump")
            self.failures = 0
            self._on_event(se)
            if not self.mb.in_transaction:
                self._maybe_commit()
            self._show()

    # -- events -------------------------------------------------------------------------------
    def _rotate_target(self, se: StreamEvent) -> tuple[int, str]:
        body = se.raw.body
        crc = self.parser.fde.has_crc32 if self.parser.fde is not None else self.src.checksum
        if crc:
            body = body[:-4]
        return struct.unpack_from("<Q", body, 0)[0], body[8:].decode("utf-8", "replace")

    def _on_event(self, se: StreamEvent) -> None:
        raw = se.raw
        h = raw.header
        code = h.type_code
        if code in _HEARTBEATS:
            self.caught_up = h.next_pos <= self.here.pos
            return
        self.caught_up = False
        if code == _E.ROTATE:
            self._on_rotate(se)
            return
        if code == _E.FORMAT_DESCRIPTION:
            event = self.parser.parse(raw)
            if se.artificial:
                return
        elif se.artificial:
            return  # MariaDB's fake GTID_LIST and the like: at no file offset
        else:
            event = self.parser.parse(raw)
        self.events += 1
        self.here.pos = h.next_pos
        self.last_event_ts = h.timestamp
        if event is not None:
            self._add(event)
            if isinstance(event, ev.TransactionPayload):
                for inner in self.parser.payload_events(event):
                    self._add(inner)
            elif isinstance(event, ev.Stop):
                self.mb.close_file(pos=h.next_pos, timestamp=h.timestamp,
                                   info=self._closing_info("STOP"))
                self.closed_files[self.here.file] = h.next_pos
        if not self.mb.in_transaction:
            if self.trx_gtid:
                self.here.gtid.add(self.trx_gtid)
                self.last_gtid = self.trx_gtid
            self.trx_gtid = None
            self._mark()

    def _mark(self) -> None:
        self.boundary = self.here.copy()
        self._marked = (self.events, self.row_changes)
        self.mb.mark()

    def _add(self, event: ev.Event) -> None:
        self.mb.add(event)
        if isinstance(event, ev.RowsEvent):
            self.row_changes += len(event.rows)
        elif isinstance(event, ev.Gtid):
            self.trx_gtid = event.gtid
        elif isinstance(event, ev.Query) and is_ddl_event("query", event.query.decode(
                "utf-8", "replace")):
            self.ddl_pending = True

    def _closing_info(self, by: str) -> dict:
        return {"events": None, "closed": True, "closed_by": by, "mode": "stream",
                "chunk": 0, "chunks": 1}

    def _on_rotate(self, se: StreamEvent) -> None:
        h = se.raw.header
        position, name = self._rotate_target(se)
        if not se.artificial:
            # The real ROTATE ends its file: the file's END row, as file mode writes it.
            self.events += 1
            self.last_event_ts = h.timestamp
            self.mb.close_file(pos=h.next_pos, timestamp=h.timestamp,
                               info=self._closing_info("ROTATE"))
            self.closed_files[self.here.file] = h.next_pos
        if self.takeover_pending and name:
            self.takeover_pending = False
            self._takeover(name)
        if name != self.mb.binlog_file:
            count = 0 if not se.artificial else self._file_row_changes(name)
            self.row_counts[name] = count
            self.mb.switch_file(name, count)
        self.parser.file = name
        self.here.file, self.here.pos = name, position
        if not self.mb.in_transaction:
            self._mark()

    # -- commits ------------------------------------------------------------------------------
    def _lag(self) -> float:
        if self.caught_up or not self.last_event_ts:
            return 0.0
        return max(0.0, time.time() - self.last_event_ts)

    def _maybe_commit(self) -> None:
        s = self.cfg.stream
        now = time.monotonic()
        moved = (self.boundary.file, self.boundary.pos) != self.committed
        if len(self.mb) >= s.batch_rows or (
                (len(self.mb) or moved or self.pending_gap is not None)
                and (now - self.last_commit) * 1000 >= s.batch_interval_ms):
            self._commit()
            # Right after a commit nothing is pending: silver may follow.
            if (self.silver_pending and s.silver_lag_seconds
                    and now - self.last_silver >= s.silver_lag_seconds):
                self._follow()

    def _commit(self, *, final: bool = False) -> None:
        """One Delta append: the micro-batch's rows (complete transactions) + a CHECKPOINT."""
        b = self.boundary
        if b is None or self.mb is None:
            return
        rows = self.mb.take()
        if self.pending_gap is not None:
            rows.insert(0, self.pending_gap)
        if not rows and (b.file, b.pos) == self.committed:
            return
        if not b.file:
            return  # nothing streamed yet in GTID mode: no file to place a checkpoint in
        now = time.monotonic()
        span = max(now - self.last_commit, 1e-6)
        self.seq += 1
        ck = Checkpoint(
            seq=self.seq, mode=self.mode, file=b.file, pos=b.pos, gtid=str(b.gtid),
            flavor=self.flavor, replica_server_id=self.server_id,
            source_server_id=self.source_server_id, last_gtid=self.last_gtid,
            last_event_ts=self.last_event_ts, events=self.events, row_changes=self.row_changes,
            events_per_second=round((self.events - self.events_at_commit) / span, 1),
            lag_seconds=round(self._lag(), 3),
            committed_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            run_started_at=self.started_at.isoformat(timespec="seconds"), stopped=final)
        rows.append(checkpoint_batch(ck, source_id=self.source_id, server_uuid=self.server_uuid))
        table = pa.Table.from_batches(rows)
        try:
            self.lake.append(self.spark.createDataFrame(table), BRONZE_EVENTS)
        except Exception as exc:  # noqa: BLE001 - engines raise many kinds
            # Nothing of this batch is visible (one commit or none): a restart redoes it.
            raise EngineError(f"appending {table.num_rows} rows to {self.lake.where(BRONZE_EVENTS)} failed: "
                              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
                              ) from exc
        self.pending_gap = None
        self.committed = (b.file, b.pos)
        self.commits += 1
        self.events_at_commit = self.events
        self.last_commit = now
        self._record_files(table, b)
        self.silver_pending = True
        self._live("running")
        if self.ddl_pending:
            self.ddl_pending = False
            self._snapshot()

    def _record_files(self, table: pa.Table, b: _Where) -> None:
        """The committed batch's files in ``<lake>/bronze/files`` (``files_state.py``)."""
        counts = self.row_counts
        kinds = table.column("event_type").to_pylist()
        for name, kind in zip(table.column("binlog_file").to_pylist(), kinds):
            if kind in ("INSERT", "UPDATE", "DELETE"):
                counts[name] = counts.get(name, 0) + 1
            else:
                counts.setdefault(name, 0)
        names = set(pc.unique(table.column("binlog_file")).to_pylist()) | {b.file}
        for name in names:
            if name in self.closed_files:
                self.files.completed(name, self.closed_files[name], counts.get(name, 0))
            else:
                self.files.streaming(name, b.pos if name == b.file else
                                     int(pc.max(table.filter(pc.equal(
                                         table.column("binlog_file"), name))
                                         .column("end_pos")).as_py() or 0),
                                     counts.get(name, 0))
        if self.closed_files:
            self.closed_files = {}
            self.files.save()  # a finished file: file mode must skip it from now on

    def _snapshot(self) -> None:
        """A schema snapshot after a batch with DDL (its coordinates lie past the DDL)."""
        from pipelines.silver.snapshot_source import take_snapshot
        from pipelines.silver.snapshot_store import save_snapshot

        try:
            snap, checks = take_snapshot(self.dsn, source_id=self.source_id)
            save_snapshot(self.spark, self.cfg, snap, checks)
            log.info("schema snapshot %s at %s:%s", snap.snapshot_id, snap.binlog_file,
                     snap.binlog_pos)
        except SourceError as exc:
            log.warning("schema snapshot after DDL failed (silver may quarantine until the "
                        "next one): %s", exc)

    def _follow(self) -> None:
        """Bring silver (and gold) up to date with what bronze holds."""
        from pipelines.silver.job import run_silver

        self.files.save()
        try:
            res = run_silver(self.spark, self.cfg)
            log.info("silver: %d appended, %d in quarantine", res.appended, res.quarantined)
            if self.gold_dsn:
                from pipelines.gold.job import run_gold

                run_gold(self.spark, self.cfg, gold_dsn=self.gold_dsn)
            if self.mirror:
                from pipelines.mirror.job import run_mirror

                run_mirror(self.spark, self.cfg)
        except Exception as exc:  # noqa: BLE001 - following must not stop the stream
            log.warning("following silver/gold failed (bronze keeps streaming): %s", exc)
        self.silver_pending = False
        self.last_silver = time.monotonic()

    # -- liveness -----------------------------------------------------------------------------
    def _status_line(self) -> str:
        h = self.here
        where = f"{h.file}:{h.pos}" if h else "?"
        gtid = f" gtid {h.gtid}" if h and h.gtid else ""
        rate = self.meter.sample(self.events)
        return (f"stream {self.source_id} {where}{gtid} | {rate:,.0f} ev/s | lag "
                f"{self._lag():.1f}s | {self.row_changes:,} row changes | {self.commits} commits")

    def _show(self) -> None:
        now = time.monotonic()
        if now - getattr(self, "_shown", 0.0) < 1.0:
            return
        self._shown = now
        self.progress.show(self._status_line(), force=True)
        self._live("running")

    def _live(self, state: str, error: str | None = None) -> None:
        import os

        h = self.here
        write_live(self.live, {
            "state": state, "pid": os.getpid(), "source_id": self.source_id, "mode": self.mode,
            "file": h.file if h else None, "pos": h.pos if h else None,
            "gtid": str(h.gtid) if h else None,
            "events_per_second": round(self.meter.sample(self.events), 1),
            "lag_seconds": round(self._lag(), 3), "events": self.events,
            "row_changes": self.row_changes, "commits": self.commits, "error": error,
            "server": f"{self.dsn.host}:{self.dsn.port}",
        })

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def stop(signum, _frame):
            log.info("signal %d: flushing and stopping", signum)
            self.stop_requested.set()

        old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
        return lambda: [signal.signal(s, h) for s, h in old.items()]
