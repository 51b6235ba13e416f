"""``binlake stream``: follow a live server as a replica into bronze, exactly once.

Flow: check the source (``source.py``), find where to start (the latest checkpoint; start
flags only on a first run or with ``reset``), detect purged binlogs, then read the dump
(``protocol.py``) event by event through file mode's decoder and row builder. At each
transaction boundary (XID, COMMIT, a standalone DDL) the micro-batch may be committed: its
rows and a CHECKPOINT row in ONE Delta append (``checkpoint.py``). Silver (then mirror and
gold when on) hold every commit within ``stream.freshness_seconds`` of it, busy or idle: they
run on a thread beside the reader (``following.py``), so reading never waits for them; after
a batch holding DDL a schema snapshot is taken through the source.

Failure model: SIGKILL at any moment loses only uncommitted work, which the restart reads
again from the checkpoint; SIGTERM/SIGINT cut the micro-batch back to the last boundary,
commit it, bring silver (mirror, gold) up to it within ``stream.stop_seconds`` (one line on
stderr says so; ``stopping.py``) and stop (exit 0). A dropped connection is retried with
exponential backoff from the last boundary. A decoding error commits what is complete, then
stops (exit 1).

Pieces, each with its own tests: :class:`~pipelines.stream.position.StreamPosition` (where
the stream is: pure), :class:`~pipelines.stream.reader.EventReader` (what one event does to
the micro-batch and the position), :class:`~pipelines.stream.committer.Committer` (when and
how a micro-batch becomes one Delta commit), :class:`~pipelines.stream.follower.Follower`
(silver, mirror, gold and post-DDL snapshots; ``freshness.py``: when; ``following.py``:
the thread they run on),
:class:`~pipelines.stream.startup.Startup` (start, takeover, gaps),
:class:`~pipelines.stream.backoff.Backoff` (reconnect waits) and
:class:`~pipelines.stream.progress.Liveness` (progress line, live file, metrics). This
module is the loop that reads the dump and hands each event to those pieces.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

from pipelines.bronze.excluded import excluded_schemas
from pipelines.config import Config
from pipelines.errors import ConfigError, DecodeError, SourceError
from pipelines.lake.few_files import keep_few_files
from pipelines.lake.tables import BRONZE_FILES, Lake
from pipelines.lake.lease import lake_lease
from pipelines.mysql.dsn import Dsn, resolve_dsn
from pipelines.source.checks import refusals
from pipelines.stream.backoff import Backoff
from pipelines.stream.checkpoint import gap_batch
from pipelines.stream.committer import Committer, Identity
from pipelines.stream.files_state import StreamFiles, compact_if_free
from pipelines.stream.follower import Follower, tick_seconds
from pipelines.stream.following import FollowThread
from pipelines.stream.position import StreamPosition
from pipelines.stream.progress import Liveness, ProgressLine, live_path
from pipelines.stream.protocol import BinlogGone, ConnectionLost, ReplicationConnection, StartAt
from pipelines.stream.reader import EventReader
from pipelines.stream.source import Gap, SourceServer
from pipelines.stream.startup import Startup
from pipelines.stream.stopping import CutShort, bounded

__all__ = ["run_stream", "StreamJob"]

log = logging.getLogger(__name__)

_SWITCH_SECONDS = 0.0005  # the GIL's switch interval while streaming (run_stream)


def run_stream(spark, cfg: Config, *, source_dsn: str, server_id: int,
               start_file: str | None = None, start_pos: int | None = None,
               start_gtid: str | None = None, gold_dsn: str | None = None, reset: bool = False,
               gap_fill: bool = True, stop_after: float | None = None,
               mirror: bool = False, metrics_port: int | None = None) -> int:
    """Stream ``source_dsn`` into the lake until stopped; return the exit code.

    ``stop_after`` (seconds) stops cleanly after that long (tests, benchmarks);
    ``metrics_port`` serves Prometheus metrics there (``metrics.py``). Raises
    :class:`ConfigError` for contradictory flags or a port it cannot listen on and
    :class:`SourceError` when the source is refused (checks, grants, a gap with
    ``gap_fill=False``) or unreachable at start.
    """
    if start_gtid and (start_file or start_pos):
        raise ConfigError("--start-gtid excludes --start-file/--start-pos")
    if start_pos is not None and not start_file:
        raise ConfigError("--start-pos needs --start-file")
    if server_id < 1 or server_id > 0xFFFFFFFF:
        raise ConfigError(f"--server-id: expected 1..4294967295, got {server_id}")
    dsn = resolve_dsn(source_dsn, cfg.source, section="source", setting="--source-dsn")
    job = StreamJob(spark, cfg, dsn=dsn, server_id=server_id,
                    gold_dsn=gold_dsn or cfg.gold.dsn or None, gap_fill=gap_fill)
    job.follower.mirror = mirror  # `--mirror`: the typed mirror tables follow silver
    switch = sys.getswitchinterval()
    # The reader gives the GIL up at every socket read, and a follow's Python (the embedded
    # engine runs its UDFs in this process) keeps it up to the switch interval each time:
    # 5 ms by default, which starved the reader to ~100 events/s during a mirror follow.
    sys.setswitchinterval(_SWITCH_SECONDS)
    try:
        return job.run(start=_flags(start_file, start_pos, start_gtid), reset=reset,
                       stop_after=stop_after, metrics_port=metrics_port)
    finally:
        sys.setswitchinterval(switch)


def _flags(file: str | None, pos: int | None, gtid: str | None) -> StartAt | None:
    if gtid:
        return StartAt(gtid=gtid)
    if file:
        return StartAt(file, pos or 4)
    return None


class StreamJob:
    """One run of the stream: the pieces (module docstring) wired together, and the loop
    that feeds them; :meth:`run` drives it."""

    def __init__(self, spark, cfg: Config, *, dsn: Dsn, server_id: int,
                 gold_dsn: str | None = None, gap_fill: bool = True) -> None:
        self.cfg = cfg
        self.gap_fill = gap_fill
        self.src = SourceServer(dsn)
        lake, source_id = Lake.of(cfg), cfg.source.name
        self.files = StreamFiles(spark, lake, source_id, f"stream://{dsn.host}:{dsn.port}",
                                 compact=lambda: compact_if_free(spark, lake, cfg),
                                 tidy=lambda: keep_few_files(spark, lake, BRONZE_FILES,
                                                             lease=(cfg, "bronze")))
        self.startup = Startup(spark, lake, source_id, self.src, self.files,
                               bronze_lease=lambda: lake_lease(cfg, "bronze"))
        self.pos = StreamPosition()
        self.committer = Committer(spark, lake, self.files,
                                   Identity(source_id, cfg.source.server_uuid or None, server_id),
                                   batch_rows=cfg.stream.batch_rows,
                                   batch_interval_ms=cfg.stream.batch_interval_ms)
        self.follower = Follower(spark, cfg, dsn=dsn, gold_dsn=gold_dsn)
        self.commit_lock = threading.RLock()  # a commit whole vs a follow's start
        self.following = FollowThread(self.follower, self.commit_lock, self.files.save)
        self.conn = ReplicationConnection(  # the flavour is known once the source is loaded
            dsn, server_id, is_mariadb=False, read_timeout=cfg.stream.read_timeout_seconds,
            heartbeat=tick_seconds(cfg) if self.follower.on else cfg.stream.heartbeat_seconds)
        self.reader = EventReader(
            self.pos, self.committer, source_id=source_id,
            server_uuid=cfg.source.server_uuid or None, batch_rows=cfg.bronze.batch_rows,
            checksum=cfg.bronze.checksum, statement_text=cfg.bronze.statement_text,
            row_changes=self.startup.file_row_changes, takeover=self.startup.takeover,
            excluded=excluded_schemas(cfg))
        self.backoff = Backoff(attempts=cfg.stream.reconnect_attempts,
                               max_seconds=cfg.stream.reconnect_max_seconds)
        self.liveness = Liveness(live_path(cfg.lake_root, source_id), source_id=source_id,
                                 server=f"{dsn.host}:{dsn.port}", pos=self.pos,
                                 committer=self.committer, follower=self.follower,
                                 line=ProgressLine(interval=cfg.stream.log_interval))
        self.stop_requested = threading.Event()

    # -- start-up -----------------------------------------------------------------------------
    def _validate(self) -> None:
        """The source's checks (refusals raise :class:`SourceError`); who we stream from."""
        self.src.load()
        ident = self.committer.identity
        self.committer.identity = Identity(
            ident.source_id, ident.server_uuid, self.conn.server_id,
            flavor="mariadb" if self.src.is_mariadb else "mysql",
            source_server_id=self.src.server_id)
        self.reader.server_crc = self.src.checksum
        self.conn.is_mariadb = self.src.is_mariadb
        checks = self.src.checks(self.conn.server_id)
        for c in checks:
            if c.level == "warn":
                log.warning("source check %s: %s", c.name, c.detail)
        refused = refusals(checks)
        if refused:
            raise SourceError("refusing to stream from this source: " + "; ".join(
                f"{c.name}: {c.detail}" for c in refused))

    def _check_gap(self, want: StartAt) -> StartAt:
        gap = self.src.find_gap(want, self.pos.here.gtid if want.gtid else None)
        return want if gap is None else self._fill_gap(gap)

    def _fill_gap(self, gap: Gap) -> StartAt:
        if not self.gap_fill:
            raise SourceError(f"binlogs are missing on the server: {gap.reason}; refusing to "
                              "skip them (--no-gap-fill)")
        resume, detail = self.startup.gap_start(gap, self.pos)
        ident = self.committer.identity
        self.committer.pending_gap = gap_batch(
            source_id=ident.source_id, server_uuid=ident.server_uuid, file=gap.resume.file,
            pos=gap.resume.pos, detail=detail)
        self.reader.new_batch(gap.resume.file, 0)
        return resume

    # -- the run ------------------------------------------------------------------------------
    def run(self, *, start: StartAt | None = None, reset: bool = False,
            stop_after: float | None = None, metrics_port: int | None = None) -> int:
        """Stream until stopped (a signal, ``stop_after`` seconds); the exit code."""
        restore = self._install_signals()
        try:
            self.liveness.serve(metrics_port)
            return self._run(start, reset, stop_after)
        finally:
            self.following.stop()  # an error stopped the stream: no follow outlives it
            self.liveness.done()
            restore()
            self.src.close()

    def _run(self, flags: StartAt | None, reset: bool, stop_after: float | None) -> int:
        self._validate()
        self.follower.start()
        want, self.committer.seq, self.reader.takeover_pending = self.startup.plan(
            flags, reset, self.pos)
        self.files.compact()  # a restart compacts what earlier runs left
        b = self.pos.boundary  # the checkpoint resumed from: what bronze holds so far
        self.follower.bronze_at = f"{b.file}:{b.pos}" if b is not None and b.file else None
        # A kill between a DDL's commit and its snapshot left the snapshot owed: pay it now.
        # Only then may silver follow: it renders the DDL's rows with that snapshot.
        self.follower.pay_snapshot(self.pos.last_ddl)
        self.following.start()
        self.reader.new_batch(self.pos.here.file)
        want = self._check_gap(want)
        log.info("streaming %s from %s (%s mode)", self.committer.identity.source_id, want,
                 self.pos.mode)
        deadline = time.monotonic() + stop_after if stop_after else None
        conn = self.conn
        code = 0
        try:
            while not self.stop_requested.is_set():
                try:
                    conn.open(self.pos.resume_point())
                    self._pump(conn, deadline)
                except BinlogGone as exc:
                    self.reader.rollback()
                    self._commit()  # complete transactions first: the gap starts after them
                    gap = self.src.find_gap(self.pos.resume_point(), self.pos.boundary.gtid)
                    if gap is None:
                        raise SourceError(str(exc)) from None
                    self._fill_gap(gap)
                except ConnectionLost as exc:
                    self.reader.rollback()
                    wait = self.backoff.failed(exc)
                    log.warning("%s; reconnecting in %ss", exc, wait)
                    self.liveness.reconnecting(str(exc))
                    self.stop_requested.wait(wait)
        except DecodeError as exc:
            log.error("decoding stopped the stream: %s", exc)
            self.liveness.failed("bronze", str(exc))
            self.reader.rollback()
            code = 1
        finally:
            conn.close()
        self._commit(final=True)
        with self.commit_lock:
            self.files.save()
        self._catch_up()
        self.liveness.write("stopped")
        return code

    def _pump(self, conn: ReplicationConnection, deadline: float | None) -> None:
        """Read events until stopped or the connection fails (raises its error)."""
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                self.stop_requested.set()
            if self.stop_requested.is_set():
                self.reader.rollback()
                return
            se = conn.read()
            if se is None:
                raise ConnectionLost("the server ended the binlog dump")
            self.backoff.ok()
            self.reader.on_event(se)
            if not self.reader.in_transaction and self.committer.due(
                    len(self.reader), self.pos.moved, time.monotonic()):
                self._commit()
            self.liveness.tick()

    # -- commits and what follows them ---------------------------------------------------------
    def _catch_up(self) -> None:
        """Stopping: the stages lacking bronze commits run once more (failed ones too),
        within ``stream.stop_seconds``; one line on stderr says what and how it ended."""
        stages = self.follower.behind()
        bound = self.cfg.stream.stop_seconds
        if not stages or not bound:
            self.following.stop()
            return
        line, started = self.liveness.line, time.monotonic()
        line.note(f"stream {self.committer.identity.source_id}: stopping: "
                  f"{' and '.join(stages)} catching up with bronze (at most {bound} s; "
                  "Ctrl-C again stops now) ...", end="")
        try:
            with bounded(bound):
                self.following.stop()  # its running follow ends first: one run per stage
                stages = self.follower.behind()
                ok = self.follower.follow(stages)
            took = time.monotonic() - started
            line.note(f" caught up in {took:.1f} s" if ok else
                      f" {self.follower.last_error[1]} failed after {took:.1f} s (see its "
                      "warning; the next run catches up)")
        except CutShort as cut:
            line.note(f" cut short after {time.monotonic() - started:.1f} s ({cut.reason}): "
                      "the next run catches up")

    def _commit(self, *, final: bool = False) -> None:
        """One Delta append: the micro-batch's rows (complete transactions) + a CHECKPOINT;
        whole under the lock a follow begins under (``following.py``)."""
        if self.pos.boundary is None or self.reader.mb is None:
            return
        b = self.pos.boundary
        with self.commit_lock:
            # A DDL's snapshot is stored before bronze holds its rows: a silver follow already
            # running reads bronze as it is then, with the snapshots it loaded at its start.
            self.follower.pay_snapshot(self.pos.last_ddl)
            done = self.committer.commit(self.reader.take(), self.pos, final=final)
            if done:
                self.follower.committed(self.pos.last_ddl, at=f"{b.file}:{b.pos}")
        if done:
            self.following.wake()
            self.liveness.write("running")

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def stop(signum, _frame):
            log.info("signal %d: flushing and stopping", signum)
            self.stop_requested.set()

        old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
        return lambda: [signal.signal(s, h) for s, h in old.items()]
