"""A micro-batch of streamed bronze rows that can be cut back to the last transaction boundary.

Rows are built by :class:`~pipelines.bronze.records.BronzeBatcher` exactly as file mode builds
them (one batcher per binlog file: ``binlog_file`` is per batcher). A transaction longer than
``batch_rows`` spills to Arrow batches while it is read; the micro-batch is only ever taken
whole at a transaction boundary (:meth:`take`), and a dropped connection cuts it back to the
last boundary (:meth:`rollback`), since the server re-sends the open transaction from its
start.
"""

from __future__ import annotations

import pyarrow as pa

from pipelines.binlog import events as ev
from pipelines.bronze.records import BronzeBatcher

__all__ = ["MicroBatch"]


class MicroBatch:
    def __init__(self, *, source_id: str, server_uuid: str | None, batch_rows: int,
                 binlog_file: str, row_changes: int = 0, statement_text: bool = False) -> None:
        self.source_id = source_id
        self.statement_text = statement_text
        self.server_uuid = server_uuid
        self.batch_rows = batch_rows
        self.batches: list[pa.RecordBatch] = []
        self._spilled = 0  # rows in self.batches
        self.batcher = self._new_batcher(binlog_file, row_changes)
        self._mark_rows = 0
        self._mark_file = binlog_file
        self._mark_changes = row_changes

    def _new_batcher(self, binlog_file: str, row_changes: int) -> BronzeBatcher:
        b = BronzeBatcher(source_id=self.source_id, binlog_file=binlog_file,
                          server_uuid=self.server_uuid, batch_rows=self.batch_rows,
                          statement_text=self.statement_text)
        b.row_changes = row_changes
        return b

    @property
    def binlog_file(self) -> str:
        return self.batcher.binlog_file

    @property
    def in_transaction(self) -> bool:
        b = self.batcher
        return b.trx_pos is not None or b.gtid is not None

    def __len__(self) -> int:
        return self._spilled + len(self.batcher)

    def add(self, event: ev.Event) -> None:
        self.batcher.add(event)
        if self.batcher.full():
            self._spill()

    def _spill(self) -> None:
        batch = self.batcher.flush()
        if batch is not None:
            self.batches.append(batch)
            self._spilled += batch.num_rows

    def close_file(self, *, pos: int, timestamp: int, info: dict) -> None:
        """The file's closing END row (a ROTATE or STOP ended it), as file mode writes it."""
        self.batcher.add_closing(ok=True, pos=pos, info=info, timestamp=timestamp)

    def switch_file(self, binlog_file: str, row_changes: int = 0) -> None:
        """Rows from here on belong to ``binlog_file`` (after a ROTATE; outside transactions)."""
        if binlog_file == self.batcher.binlog_file:
            return
        self._spill()
        self.batcher = self._new_batcher(binlog_file, row_changes)

    def mark(self) -> None:
        """Remember a transaction boundary: everything so far is complete."""
        self._mark_rows = len(self)
        self._mark_file = self.batcher.binlog_file
        self._mark_changes = self.batcher.row_changes

    def rollback(self) -> None:
        """Drop the rows after the last :meth:`mark` (an open transaction) and its context."""
        self._spill()
        keep, out = self._mark_rows, []
        for b in self.batches:
            if keep <= 0:
                break
            out.append(b if b.num_rows <= keep else b.slice(0, keep))
            keep -= b.num_rows
        self.batches = out
        self._spilled = sum(b.num_rows for b in out)
        self.batcher = self._new_batcher(self._mark_file, self._mark_changes)

    def take(self) -> list[pa.RecordBatch]:
        """All rows (call at a boundary); the micro-batch starts afresh in the same file."""
        self._spill()
        out, self.batches, self._spilled = self.batches, [], 0
        self.mark()
        return out
