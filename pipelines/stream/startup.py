"""Where a stream run starts, and how it takes files over from file mode and skips gaps.

Start (:meth:`Startup.plan`): the latest CHECKPOINT of the source (start flags apply only on
a first run or with ``--reset``); without one, the flags; without flags, the binlog after the
last one file mode completed, else the oldest the server has. Bronze rows of the source past
the checkpoint (file mode wrote them) make the stream re-read that file from its start.

Takeover (:meth:`Startup.takeover`): the stream becomes the only writer of a file and the
later files of its source: their bronze partitions are dropped (metadata only), their
progress rows become ``streaming``, and the streamed rows replace them. It holds the lake's
``bronze`` lease meanwhile (a running ``binlake bronze`` finishes first; bounded by
``lease.wait_seconds``, then the stream exits 75 naming the holder), so no bronze run decodes
those files between the delete and the stream reaching them: it skips ``streaming`` files.

Settling (:meth:`Startup.settle_files`): a restart re-derives the stream's entries in
``bronze/files`` from bronze. They are saved after the commits they describe, so a SIGKILL in
between leaves them behind: a file whose ROTATE was committed still ``streaming``, rows of
the checkpoint's file committed after its entry's last save. Silver looks at a file again only
when its entry changes, so without this it would never see those rows.

Gaps (:meth:`Startup.gap_start`): the server no longer has what a resume needs; the stream
skips to the oldest binlog it has and records a GAP row (``checkpoint.gap_batch``).
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Callable, ContextManager

from pipelines.lake.delta_ops import sql_string
from pipelines.errors import SourceError
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.stream.checkpoint import Checkpoint, load_latest
from pipelines.stream.files_state import STREAMING, StreamFiles
from pipelines.stream.gtid import GtidState
from pipelines.stream.position import StreamPosition, Where
from pipelines.stream.protocol import StartAt
from pipelines.binlog.names import binlog_order
from pipelines.stream.source import Gap, SourceServer
from pipelines.vocabulary import CHANGE_TYPES_SQL

__all__ = ["Startup"]

log = logging.getLogger(__name__)


class Startup:
    """Start-up decisions of one stream over the lake's bronze (module docstring)."""

    def __init__(self, spark, lake: Lake, source_id: str, src: SourceServer,
                 files: StreamFiles,
                 bronze_lease: Callable[[], ContextManager] = contextlib.nullcontext) -> None:
        self.spark = spark
        self.bronze_lease = bronze_lease  # the lake's `bronze` lease, taken for a takeover
        self.lake = lake
        self.source_id = source_id
        self.src = src
        self.files = files

    # -- bronze reads ------------------------------------------------------------------------
    def _bronze(self, where: str):
        if not self.lake.exists(self.spark, BRONZE_EVENTS):
            return None
        return (self.lake.read(self.spark, BRONZE_EVENTS)
                .where(f"source_id = {sql_string(self.source_id)}{where}"))

    def file_row_changes(self, name: str) -> int:
        """Row changes bronze already holds for ``name``."""
        df = self._bronze(f" AND binlog_file = {sql_string(name)} AND "
                          f"event_type IN {CHANGE_TYPES_SQL}")
        return 0 if df is None else df.count()

    def _rows_beyond(self, ck: Checkpoint) -> int:
        """Bronze rows of this source past the checkpoint (someone else wrote them)."""
        f = sql_string(ck.file)
        df = self._bronze(f" AND row_in_event >= 0 AND ((binlog_file = {f} AND start_pos >= "
                          f"{int(ck.pos)}) OR binlog_file > {f})")
        return 0 if df is None else df.count()

    def takeover(self, first_file: str) -> None:
        """Make the stream the only writer of ``first_file`` and the later files (under the
        ``bronze`` lease: no bronze run decodes them meanwhile)."""
        key = binlog_order(first_file)
        with self.bronze_lease():
            df = self._bronze("")
            present = [] if df is None else [r[0] for r in
                                             df.select("binlog_file").distinct().collect()]
            names = {n for n in present if binlog_order(n) >= key}
            if names:
                log.warning("stream takes over %s: their bronze rows are replaced by streamed "
                            "ones", ", ".join(sorted(names)))
                in_list = ", ".join(sql_string(n) for n in sorted(names))
                self.lake.delete_where(self.spark, BRONZE_EVENTS, f"source_id = "
                                       f"{sql_string(self.source_id)} AND binlog_file IN "
                                       f"({in_list})")
            for name in sorted(names | {first_file}):  # `binlake bronze` skips them now
                self.files.streaming(name, 4, 0)
            self.files.save()

    def settle_files(self, ck: Checkpoint) -> None:
        """The stream's ``bronze/files`` entries as bronze has them at checkpoint ``ck``
        (module docstring): a ``streaming`` file (or the checkpoint's, without an entry)
        that bronze holds an END row for is ``completed`` at that END; else the checkpoint's
        file is entered again with bronze's row count. Saved in one commit: the new entries'
        times tell silver to look at those files again."""
        mine = {st.binlog_file: st.status for (s, _), st in self.files.states().items()
                if s == self.source_id}
        open_ = {n for n, status in mine.items() if status == STREAMING}
        if ck.file not in mine:
            open_.add(ck.file)
        ended = set()
        if open_:
            ends = self._bronze(" AND event_type = 'END' AND binlog_file IN ("
                                + ", ".join(sql_string(n) for n in sorted(open_)) + ")")
            for name, pos, info in ([] if ends is None else
                                    ends.select("binlog_file", "start_pos", "query").collect()):
                changes = json.loads(info or "{}").get("row_changes")
                if changes is None:
                    changes = self.file_row_changes(name)
                if name != ck.file:
                    log.info("%s: its END was committed, its files entry not: completed", name)
                self.files.completed(name, int(pos), int(changes))
                ended.add(name)
        if ck.file in open_ and ck.file not in ended:
            self.files.streaming(ck.file, ck.pos, self.file_row_changes(ck.file))
        self.files.save()

    # -- where to start ----------------------------------------------------------------------
    def _where(self, file: str, pos: int, gtid: str | None = None) -> Where:
        text = gtid if gtid is not None else (self.src.gtid_at(file, pos) or "")
        return Where(file, pos, GtidState.parse(text, mariadb=self.src.is_mariadb))

    def _default_start(self) -> StartAt:
        """No checkpoint and no flags: after the last file file mode completed, else the oldest
        binlog the server has."""
        logs = [name for name, _ in self.src.binary_logs()]
        if not logs:
            raise SourceError(f"{self.src.dsn.host}:{self.src.dsn.port}: the server lists no "
                              "binlogs")
        done = sorted((st.binlog_file for (s, _), st in self.files.states().items()
                       if s == self.source_id and st.status == "completed"), key=binlog_order)
        if done:
            later = [n for n in logs if binlog_order(n) > binlog_order(done[-1])]
            if later:
                return StartAt(later[0], 4)
        return StartAt(logs[0], 4)

    def plan(self, flags: StartAt | None, reset: bool, pos: StreamPosition
             ) -> tuple[StartAt, int, bool]:
        """Set ``pos`` where the run starts; return (what to ask the server for, the last
        CHECKPOINT's sequence number, whether the first ROTATE's file must be taken over)."""
        ck = None if reset else load_latest(self.spark, self.lake, self.source_id)
        if ck is not None:
            self.settle_files(ck)
            pos.resume(events=ck.events, row_changes=ck.row_changes, last_gtid=ck.last_gtid,
                       last_ddl=ck.last_ddl)
            pos.mode = ck.mode
            if flags is not None:
                log.warning("a checkpoint exists (%s:%d): start flags are ignored (use --reset)",
                            ck.file, ck.pos)
            if self._rows_beyond(ck):
                log.warning("bronze holds rows of %s past the checkpoint %s:%d (written by file "
                            "mode?): streaming the file again from its start", self.source_id,
                            ck.file, ck.pos)
                self.takeover(ck.file)
                pos.mode = "position"
                pos.start(self._where(ck.file, 4))
                return StartAt(ck.file, 4), ck.seq, False
            pos.start(self._where(ck.file, ck.pos, ck.gtid or ""))
            pos.committed = (ck.file, ck.pos)
            gtid = (ck.gtid or None) if ck.mode == "gtid" else None
            return StartAt(ck.file, ck.pos, gtid=gtid), ck.seq, False
        seq = 0
        if reset:
            old = load_latest(self.spark, self.lake, self.source_id)
            seq = old.seq if old is not None else 0
        start = flags or self._default_start()
        pos.mode = start.mode
        if start.gtid:
            pos.start(Where("", 4, GtidState.parse(start.gtid, mariadb=self.src.is_mariadb)))
            return start, seq, True
        if start.pos > 4:
            log.warning("starting inside %s at %d: rows before it in that file are not "
                        "streamed", start.file, start.pos)
        self.takeover(start.file)
        pos.start(self._where(start.file, start.pos))
        return start, seq, False

    def gap_start(self, gap: Gap, pos: StreamPosition) -> tuple[StartAt, dict]:
        """Skip ``gap``: take the resume file over and move ``pos`` there; return where to
        ask the server from and the GAP row's detail."""
        log.warning("GAP: %s; skipping ahead to %s and recording the gap", gap.reason, gap.resume)
        resume = StartAt(gap.resume.file, gap.resume.pos,
                         gtid=gap.resume.gtid if pos.mode == "gtid" else None)
        detail = {"reason": gap.reason, "from": str(gap.wanted), "to": str(gap.resume),
                  "last_gtid": pos.last_gtid}
        where = self._where(gap.resume.file, gap.resume.pos,
                            gap.resume.gtid or self.src.gtid_at(gap.resume.file, 4) or "")
        self.takeover(gap.resume.file)
        pos.jump(where)
        return resume, detail
