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

Pieces: :class:`~pipelines.stream.position.StreamPosition` (where the stream is: pure),
:class:`~pipelines.stream.committer.Committer` (when and how a micro-batch becomes one Delta
commit), :class:`~pipelines.stream.follower.Follower` (silver/gold and post-DDL snapshots),
:class:`~pipelines.stream.startup.Startup` (start, takeover, gaps). This module is the loop
that reads events and hands them to those pieces.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import struct
import threading
import time

from pipelines.bronze import events as ev
from pipelines.bronze.files import compact_states
from pipelines.bronze.parser import BinlogParser, ChecksumPolicy
from pipelines.config import Config
from pipelines.errors import (ConfigError, DecodeError, LeaseHeldError, LeaseLostError,
                              SourceError)
from pipelines.lake import Lake
from pipelines.lease import lake_lease
from pipelines.mysql_client import Dsn, resolve_dsn
from pipelines.silver.snapshot_source import is_ddl_event, refusals
from pipelines.stream.batch import MicroBatch
from pipelines.stream.checkpoint import gap_batch
from pipelines.stream.committer import Committer, Identity
from pipelines.stream.files_state import StreamFiles
from pipelines.stream.follower import Follower
from pipelines.stream.position import StreamPosition
from pipelines.stream.progress import ProgressLine, RateMeter, live_path, write_live
from pipelines.stream.protocol import (
    BinlogGone, ConnectionLost, ReplicationConnection, StartAt, StreamEvent,
)
from pipelines.stream.source import Gap, SourceServer
from pipelines.stream.startup import Startup

__all__ = ["run_stream", "StreamJob"]

log = logging.getLogger(__name__)

_E = ev.EventType
_HEARTBEATS = frozenset({_E.HEARTBEAT, _E.HEARTBEAT_V2})


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
    dsn = resolve_dsn(source_dsn, cfg.source, section="source", setting="--source-dsn")
    job = StreamJob(spark, cfg, dsn=dsn, server_id=server_id,
                    gold_dsn=gold_dsn or cfg.gold.dsn or None, gap_fill=gap_fill,
                    stop_after=stop_after)
    job.follower.mirror = mirror  # `--mirror`: the typed mirror tables follow silver
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
        self.source_id = cfg.source.name
        self.server_uuid = cfg.source.server_uuid or None
        self.src = SourceServer(dsn)
        self.lake = Lake.of(cfg)
        self.files = StreamFiles(spark, self.lake, self.source_id,
                                 f"stream://{dsn.host}:{dsn.port}", compact=self._compact_files)
        self.startup = Startup(spark, self.lake, self.source_id, self.src, self.files,
                               bronze_lease=lambda: lake_lease(cfg, "bronze"))
        self.pos = StreamPosition()
        self.committer = Committer(spark, self.lake, self.files,
                                   Identity(self.source_id, self.server_uuid, server_id),
                                   batch_rows=cfg.stream.batch_rows,
                                   batch_interval_ms=cfg.stream.batch_interval_ms)
        self.follower = Follower(spark, cfg, dsn=dsn, gold_dsn=gold_dsn)
        self.stop_requested = threading.Event()
        self.progress = ProgressLine()
        self.meter = RateMeter()
        self.live = live_path(cfg.lake_root, self.source_id)
        self.takeover_pending = False  # GTID start: take over the first ROTATE's file
        self.failures = 0  # failed connects in a row
        self.parser: BinlogParser | None = None
        self.mb: MicroBatch | None = None
        self._shown = 0.0

    # -- start-up -----------------------------------------------------------------------------
    def _validate(self) -> None:
        self.src.load()
        self.committer.identity = Identity(
            self.source_id, self.server_uuid, self.server_id,
            flavor="mariadb" if self.src.is_mariadb else "mysql",
            source_server_id=self.src.server_id)
        checks = self.src.checks(self.server_id)
        for c in checks:
            if c.level == "warn":
                log.warning("source check %s: %s", c.name, c.detail)
        refused = refusals(checks)
        if refused:
            raise SourceError("refusing to stream from this source: " + "; ".join(
                f"{c.name}: {c.detail}" for c in refused))

    def _new_batch(self, file: str, row_changes: int | None = None) -> None:
        if row_changes is None:
            row_changes = self.startup.file_row_changes(file) if file else 0
        self.committer.file_opened(file, row_changes)
        self.mb = MicroBatch(source_id=self.source_id, server_uuid=self.server_uuid,
                             batch_rows=self.cfg.bronze.batch_rows, binlog_file=file,
                             row_changes=row_changes,
                             statement_text=self.cfg.bronze.statement_text)
        self._new_parser()

    def _new_parser(self) -> None:
        self.parser = BinlogParser(file=self.pos.here.file or "<stream>",
                                   checksum=ChecksumPolicy(self.cfg.bronze.checksum))

    def _check_gap(self, want: StartAt) -> StartAt:
        gap = self.src.find_gap(want, self.pos.here.gtid if want.gtid else None)
        return want if gap is None else self._fill_gap(gap)

    def _fill_gap(self, gap: Gap) -> StartAt:
        if not self.gap_fill:
            raise SourceError(f"binlogs are missing on the server: {gap.reason}; refusing to "
                              "skip them (--no-gap-fill)")
        resume, detail = self.startup.gap_start(gap, self.pos)
        self.committer.pending_gap = gap_batch(
            source_id=self.source_id, server_uuid=self.server_uuid, file=gap.resume.file,
            pos=gap.resume.pos, detail=detail)
        self._new_batch(gap.resume.file, 0)
        return resume

    def _compact_files(self) -> None:
        """Compact ``bronze/files`` when due, if the ``bronze`` lease is free right now (a
        bronze run holding it compacts on its own; the stream never waits for it)."""
        now = dataclasses.replace(self.cfg, lease=dataclasses.replace(self.cfg.lease,
                                                                      wait_seconds=0))
        try:
            with lake_lease(now, "bronze"):
                done = compact_states(self.spark, self.lake, strict=False)
        except LeaseHeldError:
            return
        except LeaseLostError as exc:  # the DELETE is safe without it: only say so
            log.warning("bronze/files compaction: %s", exc)
            return
        if done is not None:
            log.info("bronze/files compacted: %d -> %d rows for %d file(s)", done.rows_before,
                     done.rows_after, done.files)

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
        want, self.committer.seq, self.takeover_pending = self.startup.plan(flags, reset,
                                                                            self.pos)
        self._compact_files()  # a restart compacts what earlier runs left
        self._new_batch(self.pos.here.file)
        want = self._check_gap(want)
        log.info("streaming %s from %s (%s mode)", self.source_id, want, self.pos.mode)
        deadline = time.monotonic() + self.stop_after if self.stop_after else None
        conn = ReplicationConnection(self.dsn, self.server_id, is_mariadb=self.src.is_mariadb,
                                     heartbeat=float(self.cfg.stream.heartbeat_seconds),
                                     read_timeout=float(self.cfg.stream.read_timeout_seconds))
        code = 0
        try:
            while not self.stop_requested.is_set():
                try:
                    conn.open(self.pos.resume_point())
                    self._pump(conn, deadline)
                except BinlogGone as exc:
                    self._rollback()
                    self._commit()  # complete transactions first: the gap starts after them
                    gap = self.src.find_gap(self.pos.resume_point(), self.pos.boundary.gtid)
                    if gap is None:
                        raise SourceError(str(exc)) from None
                    self._fill_gap(gap)
                except ConnectionLost as exc:
                    self._rollback()
                    self._retry_later(exc)
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

    def _retry_later(self, exc: ConnectionLost) -> None:
        self.failures += 1
        limit = self.cfg.stream.reconnect_attempts
        if limit and self.failures > limit:
            raise SourceError(f"{exc} (gave up after {limit} reconnects)") from None
        wait = min(2 ** (self.failures - 1), self.cfg.stream.reconnect_max_seconds)
        log.warning("%s; reconnecting in %ss", exc, wait)
        self._live("reconnecting", error=str(exc))
        self.stop_requested.wait(wait)

    def _rollback(self) -> None:
        """Forget everything after the last transaction boundary (the server re-sends it)."""
        self.mb.rollback()
        self.pos.rollback()
        self._new_parser()

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
        h = se.raw.header
        if h.type_code in _HEARTBEATS:
            self.pos.heartbeat(h.next_pos)
            return
        self.pos.caught_up = False
        if h.type_code == _E.ROTATE:
            self._on_rotate(se)
            return
        if h.type_code == _E.FORMAT_DESCRIPTION:
            event = self.parser.parse(se.raw)
            if se.artificial:
                return
        elif se.artificial:
            return  # MariaDB's fake GTID_LIST and the like: at no file offset
        else:
            event = self.parser.parse(se.raw)
        self.pos.event(h.next_pos, h.timestamp)
        if event is not None:
            self._add(event)
            if isinstance(event, ev.TransactionPayload):
                for inner in self.parser.payload_events(event):
                    self._add(inner)
            elif isinstance(event, ev.Stop):
                self.mb.close_file(pos=h.next_pos, timestamp=h.timestamp,
                                   info=_closing_info("STOP"))
                self.committer.file_closed(self.pos.here.file, h.next_pos)
        if not self.mb.in_transaction:
            self.pos.transaction_end()
            self.mb.mark()

    def _add(self, event: ev.Event) -> None:
        self.mb.add(event)
        if isinstance(event, ev.RowsEvent):
            self.pos.rows(len(event.rows))
        elif isinstance(event, ev.Gtid):
            self.pos.gtid(event.gtid)
        elif isinstance(event, ev.Query) and is_ddl_event("query", event.query.decode(
                "utf-8", "replace")):
            self.follower.saw_ddl()

    def _on_rotate(self, se: StreamEvent) -> None:
        h = se.raw.header
        position, name = self._rotate_target(se)
        if not se.artificial:
            # The real ROTATE ends its file: the file's END row, as file mode writes it.
            self.mb.close_file(pos=h.next_pos, timestamp=h.timestamp,
                               info=_closing_info("ROTATE"))
            self.committer.file_closed(self.pos.here.file, h.next_pos)
        if self.takeover_pending and name:
            self.takeover_pending = False
            self.startup.takeover(name)
        if name != self.mb.binlog_file:
            count = 0 if not se.artificial else self.startup.file_row_changes(name)
            self.committer.file_opened(name, count)
            self.mb.switch_file(name, count)
        self.parser.file = name
        self.pos.rotate(name, position, timestamp=None if se.artificial else h.timestamp)
        if not self.mb.in_transaction:
            self.pos.mark()
            self.mb.mark()

    # -- commits ------------------------------------------------------------------------------
    def _maybe_commit(self) -> None:
        now = time.monotonic()
        if self.committer.due(len(self.mb), self.pos.moved, now):
            self._commit()
            # Right after a commit nothing is pending: silver may follow.
            if self.follower.due(now):
                self.files.save()
                self.follower.follow()

    def _commit(self, *, final: bool = False) -> None:
        """One Delta append: the micro-batch's rows (complete transactions) + a CHECKPOINT."""
        if self.pos.boundary is None or self.mb is None:
            return
        if self.committer.commit(self.mb.take(), self.pos, final=final):
            self._live("running")
            self.follower.committed()

    # -- liveness -----------------------------------------------------------------------------
    def _status_line(self) -> str:
        p = self.pos
        h = p.here
        where = f"{h.file}:{h.pos}" if h else "?"
        gtid = f" gtid {h.gtid}" if h and h.gtid else ""
        rate = self.meter.sample(p.events)
        return (f"stream {self.source_id} {where}{gtid} | {rate:,.0f} ev/s | lag "
                f"{p.lag(time.time()):.1f}s | {p.row_changes:,} row changes | "
                f"{self.committer.commits} commits")

    def _show(self) -> None:
        now = time.monotonic()
        if now - self._shown < 1.0:
            return
        self._shown = now
        self.progress.show(self._status_line(), force=True)
        self._live("running")

    def _live(self, state: str, error: str | None = None) -> None:
        p = self.pos
        h = p.here
        write_live(self.live, {
            "state": state, "pid": os.getpid(), "source_id": self.source_id, "mode": p.mode,
            "file": h.file if h else None, "pos": h.pos if h else None,
            "gtid": str(h.gtid) if h else None,
            "events_per_second": round(self.meter.sample(p.events), 1),
            "lag_seconds": round(p.lag(time.time()), 3), "events": p.events,
            "row_changes": p.row_changes, "commits": self.committer.commits, "error": error,
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


def _closing_info(by: str) -> dict:
    return {"events": None, "closed": True, "closed_by": by, "mode": "stream",
            "chunk": 0, "chunks": 1}
