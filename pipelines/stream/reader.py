"""What one event of the dump does: decoded by file mode's parser into the micro-batch's rows,
and the stream's position moved with it. No I/O of its own.

:class:`EventReader` holds the three things that must move together, event by event: the
:class:`~pipelines.binlog.parser.BinlogParser` (FORMAT_DESCRIPTION, table maps), the
:class:`~pipelines.stream.batch.MicroBatch` (rows built exactly as file mode builds them) and
the :class:`~pipelines.stream.position.StreamPosition` (here / boundary / committed).

Invariants, each a test in ``tests/stream/test_reader.py``:

* events the server makes up (a dump's first ROTATE, a re-sent FORMAT_DESCRIPTION, MariaDB's
  fake GTID_LIST, heartbeats) set state only: no row, no event counted, no offset moved;
* the boundary and the batch's mark move together, only where no transaction is open;
* :meth:`rollback` puts batch, position and parser back at that boundary (the server re-sends
  everything after it on a reconnect);
* a real ROTATE or a STOP writes the file's END row, as file mode does, and tells the
  committer the file is complete.

Its collaborators are narrow: the committer's file bookkeeping (``file_opened`` /
``file_closed``), how many row changes bronze already holds for a file (a resume inside it),
and the takeover of the first file a GTID start reaches. A DDL moves the position's
``last_ddl`` (a schema snapshot is owed past it: ``follower.py``).
"""

from __future__ import annotations

import struct
from typing import Callable, Protocol

from pipelines.binlog import events as ev
from pipelines.bronze.excluded import drop_schemas
from pipelines.binlog.parser import BinlogParser, ChecksumPolicy
from pipelines.source.schema import is_ddl_event
from pipelines.stream.batch import MicroBatch
from pipelines.stream.position import StreamPosition
from pipelines.stream.protocol import StreamEvent

__all__ = ["EventReader", "FileBook"]

_E = ev.EventType
_HEARTBEATS = frozenset({_E.HEARTBEAT, _E.HEARTBEAT_V2})


class FileBook(Protocol):
    """The committer's bookkeeping of the files a micro-batch spans."""

    def file_opened(self, name: str, row_changes: int) -> None: ...

    def file_closed(self, name: str, end_pos: int) -> None: ...


def _closing_info(by: str) -> dict:
    return {"events": None, "closed": True, "closed_by": by, "mode": "stream",
            "chunk": 0, "chunks": 1}


class EventReader:
    """Events in, micro-batch rows and position out (module docstring)."""

    def __init__(self, pos: StreamPosition, book: FileBook, *, source_id: str,
                 server_uuid: str | None, batch_rows: int, checksum: str = "raise",
                 statement_text: bool = False,
                 row_changes: Callable[[str], int] = lambda _name: 0,
                 takeover: Callable[[str], None] = lambda _name: None,
                 excluded: frozenset[str] = frozenset()) -> None:
        self.pos = pos
        self.excluded = excluded  # schemas left out (bronze/excluded.py: gold's own database)
        self.book = book
        self.source_id, self.server_uuid = source_id, server_uuid
        self.batch_rows, self.checksum, self.statement_text = batch_rows, checksum, statement_text
        self.row_changes, self.takeover = row_changes, takeover
        self.server_crc = False  # the source's binlog_checksum (a ROTATE before any FDE)
        self.takeover_pending = False  # a GTID start: take over the first ROTATE's file
        self.parser: BinlogParser | None = None
        self.mb: MicroBatch | None = None

    # -- batches ------------------------------------------------------------------------------
    def new_batch(self, file: str, row_changes: int | None = None) -> None:
        """Start a fresh micro-batch in ``file`` (which bronze holds ``row_changes`` of)."""
        if row_changes is None:
            row_changes = self.row_changes(file) if file else 0
        self.book.file_opened(file, row_changes)
        self.mb = MicroBatch(source_id=self.source_id, server_uuid=self.server_uuid,
                             batch_rows=self.batch_rows, binlog_file=file,
                             row_changes=row_changes, statement_text=self.statement_text)
        self._new_parser()

    def _new_parser(self) -> None:
        self.parser = BinlogParser(file=self.pos.here.file or "<stream>",
                                   checksum=ChecksumPolicy(self.checksum))

    def rollback(self) -> None:
        """Forget everything after the last transaction boundary (the server re-sends it)."""
        self.mb.rollback()
        self.pos.rollback()
        self._new_parser()

    @property
    def in_transaction(self) -> bool:
        return self.mb.in_transaction

    def __len__(self) -> int:
        return len(self.mb)

    def take(self):
        """The micro-batch's rows (complete transactions; call at a boundary)."""
        return [drop_schemas(b, self.excluded) for b in self.mb.take()]

    # -- events -------------------------------------------------------------------------------
    def on_event(self, se: StreamEvent) -> None:
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
                self.book.file_closed(self.pos.here.file, h.next_pos)
        if not self.mb.in_transaction:
            self.pos.transaction_end()
            self.mb.mark()

    def _add(self, event: ev.Event) -> None:
        self.mb.add(event)
        if isinstance(event, ev.RowsEvent):
            self.pos.rows(len(event.rows))
        elif isinstance(event, ev.Gtid):
            self.pos.gtid(event.gtid)
        elif isinstance(event, ev.Query) and event.schema not in self.excluded and is_ddl_event(
                "query", event.query.decode("utf-8", "replace")):
            self.pos.ddl()

    def _rotate_target(self, se: StreamEvent) -> tuple[int, str]:
        body = se.raw.body
        crc = self.parser.fde.has_crc32 if self.parser.fde is not None else self.server_crc
        if crc:
            body = body[:-4]
        return struct.unpack_from("<Q", body, 0)[0], body[8:].decode("utf-8", "replace")

    def _on_rotate(self, se: StreamEvent) -> None:
        h = se.raw.header
        position, name = self._rotate_target(se)
        if not se.artificial:
            # The real ROTATE ends its file: the file's END row, as file mode writes it.
            self.mb.close_file(pos=h.next_pos, timestamp=h.timestamp,
                               info=_closing_info("ROTATE"))
            self.book.file_closed(self.pos.here.file, h.next_pos)
        if self.takeover_pending and name:
            self.takeover_pending = False
            self.takeover(name)
        if name != self.mb.binlog_file:
            count = 0 if not se.artificial else self.row_changes(name)
            self.book.file_opened(name, count)
            self.mb.switch_file(name, count)
        self.parser.file = name
        self.pos.rotate(name, position, timestamp=None if se.artificial else h.timestamp)
        if not self.mb.in_transaction:
            self.pos.mark()
            self.mb.mark()
