"""Pure: decoded events → bronze rows as Arrow record batches (no Spark, no I/O).

One bronze row per row change (UPDATE keeps before and after in one row), plus one row per
QUERY event other than BEGIN/COMMIT (DDL: silver needs to know where a table's schema
changed), one per INCIDENT event (a gap the server reported), plus one closing row per file: ``END`` (decoded to the end or to the last
complete event of a file still being written) or ``ERROR`` (decoding stopped; ``query`` holds
the message, ``start_pos`` the position of the failing event). The closing row is how a
decoding task reports to the driver through the same DataFrame.

Transaction context is tracked here: the GTID (MySQL ``uuid:n``, MariaDB ``d-s-n``), the
transaction's first event position (``trx_pos``), the BEGIN's thread id (``connection_id``)
and MySQL 8's microsecond commit time from the GTID event (``commit_ts_us``). Statement
context: the text of the last ROWS_QUERY (MySQL, ``binlog_rows_query_log_events``) or
ANNOTATE_ROWS (MariaDB, ``binlog_annotate_row_events``) event goes on each row change of that
statement (``query_text``), up to the rows event flagged STMT_END, when ``statement_text`` is
on (``bronze.statement_text``: a statement of N rows is stored N times, off by default). The columns are dbtrail's
(docs/gold.md); NULL when the binlog has none.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog import events as ev
from pipelines.binlog.fast.image_sink import ImageSink
from pipelines.binlog.fast.rows_columnar import decode_into
from pipelines.binlog.table_map import TableMap
from pipelines.errors import DecodeError
from pipelines.lake.tables import BRONZE_EVENTS
from pipelines.config import ARROW_BATCH_ROWS

__all__ = ["BRONZE_SCHEMA", "BRONZE_DDL", "BronzeBatcher", "file_batches", "truncated_note", "TABLE_MAP_FIELDS",
           "table_map_hash"]

# Declared once in the lake registry; the Arrow schema the decoders write and the Spark DDL
# (mapInArrow's return type) are derived from it.
BRONZE_SCHEMA = BRONZE_EVENTS.arrow_schema()
BRONZE_DDL = BRONZE_EVENTS.ddl()
_STMT_END = 0x0001  # rows event flag: the statement's last rows event (Rows_log_event::STMT_END_F)
# A batch is also full at this many bytes of row images (wide rows: memory bounded by bytes).
_MAX_IMAGE_BYTES = 64 << 20
_SINK_START = (1024, 16384, 1 << 20)  # rows, values, data bytes of a first batch's sinks
# The columns a batcher keeps one value per run of rows for (``BronzeBatcher._push``); the
# last two are the run's TABLE_MAP slot and, on a TABLE_MAP row, the slot whose facts it holds.
_RUN_COLUMNS = ("server_id", "start_pos", "end_pos", "event_timestamp", "event_type", "gtid",
                "trx_pos", "connection_id", "schema_name", "table_name", "table_id",
                "before_present", "after_present", "query", "query_text", "commit_ts_us",
                "tm_slot", "facts_slot")
# A TABLE_MAP's facts: on the TABLE_MAP rows only; a row change names them by table_map_hash.
TABLE_MAP_FIELDS = ["column_types", "column_meta", "column_nullable", "column_names",
                    "column_unsigned", "column_charsets", "primary_key", "enum_values",
                    "set_values"]


def _tm_values(tm: TableMap) -> list:
    return [tm.column_types, tm.column_meta, tm.nullable, tm.column_names, tm.unsigned,
            tm.charsets, tm.primary_key, tm.enum_values, tm.set_values]


def table_map_hash(values: list) -> int:
    """The key of a TABLE_MAP's facts (``TABLE_MAP_FIELDS`` values, in order): equal facts,
    equal key; 64 bits of BLAKE2b over their ``repr``."""
    text = repr(values).encode("utf-8", "backslashreplace")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


class BronzeBatcher:
    """Accumulates bronze rows column by column and emits Arrow batches of ``batch_rows``."""

    def __init__(self, *, source_id: str, binlog_file: str, server_uuid: str | None = None,
                 batch_rows: int = ARROW_BATCH_ROWS, statement_text: bool = False) -> None:
        self.source_id = source_id
        self.statement_text = statement_text  # keep ROWS_QUERY/ANNOTATE_ROWS text per row
        self.binlog_file = binlog_file
        self.server_uuid = server_uuid
        self.batch_rows = batch_rows
        self.row_changes = 0
        self.gtid: str | None = None
        self.trx_pos: int | None = None
        self.connection_id: int | None = None
        self.commit_ts_us: int | None = None
        self.query_text: str | None = None
        # starting room of the image sinks: what the last batch used, at least this
        self._sizes = {"before": _SINK_START, "after": _SINK_START}
        self._written: set[int] = set()  # table_map_hash of the TABLE_MAP rows emitted
        self._map_at = (-1, 0)  # (position, row_in_event) of the last TABLE_MAP row
        self._reset()

    def _reset(self) -> None:
        # Rows come in runs: a rows event's row changes share every column but
        # ``row_in_event`` (numbered on from the run's base) and the image. One value per run
        # here; :meth:`flush` expands them to rows with one ``take`` per column.
        self._cols: dict[str, list] = {n: [] for n in _RUN_COLUMNS}
        self._counts: list[int] = []  # rows per run
        self._bases: list[int] = []  # each run's first row_in_event
        self._n = 0
        # row_before / row_after: Arrow buffers (the compiled row loop writes into them)
        self._before = ImageSink(*self._sizes["before"])
        self._after = ImageSink(*self._sizes["after"])
        self._tms: list[TableMap] = []
        self._hashes: list[int] = []  # per slot
        self._tm_slot: dict[int, int] = {}

    def __len__(self) -> int:
        return self._n

    def _push(self, n: int, base: int, values: dict) -> None:
        """A run of ``n`` rows sharing ``values`` (every run column but ``row_in_event``)."""
        c = self._cols
        for name in _RUN_COLUMNS:
            c[name].append(values[name])
        self._counts.append(n)
        self._bases.append(base)
        self._n += n

    # -- transaction context ---------------------------------------------------------
    def _end_trx(self) -> None:
        self.gtid = self.trx_pos = self.connection_id = self.commit_ts_us = None
        self.query_text = None

    def add(self, event: ev.Event) -> None:
        """Take one decoded event in binlog order."""
        if isinstance(event, ev.RowsEvent):
            self._add_rows(event)
        elif isinstance(event, ev.Query):
            self._add_query(event)
        elif isinstance(event, ev.Gtid):
            self.gtid = event.gtid
            self.trx_pos = event.header.pos
            self.connection_id = None
            self.commit_ts_us = event.commit_ts_us  # never carried over from the last one
            self.query_text = None
        elif isinstance(event, ev.RowsQuery) and self.statement_text:
            self.query_text = event.query.decode("utf-8", "replace")
        elif isinstance(event, ev.Xid):
            self._end_trx()
        elif isinstance(event, ev.Incident):
            # The server lost changes here (e.g. a failed statement it could not log): a gap
            # that status and quality report.
            self._row(event.header, 0, "INCIDENT",
                      query=json.dumps({"incident": event.incident, "message": event.message}))

    def _add_query(self, q: ev.Query) -> None:
        text = q.query.strip()
        upper = text[:12].upper()
        if upper == b"BEGIN" or upper.startswith(b"XA START"):
            if self.trx_pos is None:
                self.trx_pos = q.header.pos
            self.connection_id = q.thread_id
            return
        if upper in (b"COMMIT", b"ROLLBACK") or upper.startswith((b"XA COMMIT", b"XA ROLLBACK")):
            self._end_trx()
            return
        if upper.startswith(b"XA END"):
            return
        h = q.header
        self.query_text = None  # a statement logged as text: its own rows event, if any, follows
        self._row(h, 0, "QUERY", schema=q.schema or None,
                  query=text.decode("utf-8", "replace"), connection_id=q.thread_id)
        if self.trx_pos is None or self.trx_pos == h.pos or self.connection_id is None:
            # DDL and other statements outside BEGIN…COMMIT are their own transaction.
            self._end_trx()

    def _row(self, h, idx: int, etype: str, *, schema: str | None = None,
             query: str | None = None, connection_id: int | None = None) -> None:
        """One row for an event that is not a row change (QUERY, INCIDENT, END/ERROR)."""
        self._push(1, idx, {
            "server_id": h.server_id, "start_pos": h.pos, "end_pos": h.pos + h.event_length,
            "event_timestamp": h.timestamp * 1_000_000, "event_type": etype,
            "gtid": self.gtid,
            "trx_pos": self.trx_pos if self.trx_pos is not None else h.pos,
            "connection_id": connection_id if connection_id is not None
            else self.connection_id,
            "schema_name": schema, "table_name": None, "table_id": None,
            "before_present": None, "after_present": None, "query": query,
            "query_text": None,
            "commit_ts_us": self.commit_ts_us if etype == "QUERY" else None,
            "tm_slot": None, "facts_slot": None})
        self._before.add_nulls(1)
        self._after.add_nulls(1)

    def _add_rows(self, e: ev.RowsEvent) -> None:
        """All row changes of one event at once: one run (:meth:`_push`), not a row each.

        Rows the parser left undecoded (``e.pending``) are decoded straight into the image
        sinks here; a failure raises the parser's located :class:`DecodeError` and leaves
        the batch as it was.
        """
        if e.pending is not None:
            n = decode_into(e, self._before, self._after, self.binlog_file)
        else:
            rows = e.rows
            n = len(rows)
            if n:
                befores, afters = zip(*rows)
                self._before.add_python(befores)
                self._after.add_python(afters)
        if not n:
            return
        h = e.header
        tm = e.table
        # Copies of a re-sent TABLE_MAP share their codecs (TableMap.rebound): one slot each.
        key = id(tm._codecs)
        slot = self._tm_slot.get(key)
        if slot is None:
            slot = self._tm_slot[key] = len(self._tms)
            self._tms.append(tm)
            self._hashes.append(table_map_hash(_tm_values(tm)))
        values = {
            "server_id": h.server_id, "start_pos": h.pos, "end_pos": h.pos + h.event_length,
            "event_timestamp": h.timestamp * 1_000_000, "event_type": e.kind,
            "gtid": self.gtid,
            "trx_pos": self.trx_pos if self.trx_pos is not None else h.pos,
            "connection_id": self.connection_id, "schema_name": tm.schema,
            "table_name": tm.table, "table_id": tm.table_id,
            "before_present": e.present_before, "after_present": e.present_after,
            "query": None, "query_text": self.query_text,
            "commit_ts_us": self.commit_ts_us, "tm_slot": slot, "facts_slot": None}
        base = e.row_base  # inside a TRANSACTION_PAYLOAD, rows number on across inner events
        flags = e.partial_json_flags
        if flags is None:
            self._push(n, base, values)
        else:
            # PARTIAL_JSON: a column whose after value could not be rebuilt from the diff is
            # marked absent (unknown), never reported as NULL. A run per row.
            ncols = tm.column_count
            for k, cols in enumerate(flags):
                present = list(e.present_after or [True] * ncols)
                for i in cols:
                    present[i] = False
                self._push(1, base + k, {**values,
                                         "after_present": present if cols else e.present_after})
        if e.flags & _STMT_END:
            self.query_text = None
        self.row_changes += n
        if self._hashes[slot] not in self._written:
            self._written.add(self._hashes[slot])
            self._map_row(h, slot)

    def _map_row(self, h, slot: int) -> None:
        """The TABLE_MAP row after the first rows event naming a map (in this batcher's rows):
        that event's position and context, the facts (at flush), ``row_in_event`` -1 (-2, -3
        for the next maps first named at the same position: the inner events of a
        TRANSACTION_PAYLOAD share it), so that no two bronze rows share a key."""
        last = {name: values[-1] for name, values in self._cols.items()}
        at = self._map_at = (h.pos, self._map_at[1] - 1 if self._map_at[0] == h.pos else -1)
        self._push(1, at[1], {**last, "event_type": "TABLE_MAP", "before_present": None,
                              "after_present": None, "query": None, "query_text": None,
                              "tm_slot": slot, "facts_slot": slot})
        self._before.add_nulls(1)
        self._after.add_nulls(1)

    def add_closing(self, *, ok: bool, pos: int, info: dict, timestamp: int = 0,
                    chunk: int = 0) -> None:
        """Append the file's closing row: END at ``pos`` or ERROR at the failing ``pos``.

        ``info`` (events read, row changes, closed by ROTATE/STOP, note or error) is stored
        as JSON text in ``query``.
        """
        h = _Pseudo(pos, timestamp)
        info = {"row_changes": self.row_changes, **info}
        self._row(h, chunk, "END" if ok else "ERROR", query=json.dumps(info, sort_keys=True))

    def full(self) -> bool:
        return (self._n >= self.batch_rows
                or self._before.nbytes + self._after.nbytes >= _MAX_IMAGE_BYTES)

    def flush(self) -> pa.RecordBatch | None:
        """Return the accumulated rows as one batch (``None`` when empty) and start afresh."""
        n = self._n
        if not n:
            return None
        c = self._cols
        counts = np.array(self._counts, np.int64)
        run_of_row = pa.array(np.repeat(np.arange(len(counts), dtype=np.int32), counts))
        first_row = np.cumsum(counts) - counts
        arrays: dict[str, pa.Array] = {
            "source_id": pa.repeat(pa.scalar(self.source_id, pa.string()), n),
            "server_uuid": pa.repeat(pa.scalar(self.server_uuid or None, pa.string()), n),
            "binlog_file": pa.repeat(pa.scalar(self.binlog_file, pa.string()), n),
            "row_in_event": pa.array(np.arange(n, dtype=np.int32) - np.repeat(
                (first_row - np.array(self._bases, np.int64)).astype(np.int32), counts)),
        }
        for f in BRONZE_SCHEMA:
            if f.name in c:
                arrays[f.name] = pa.array(c[f.name], f.type).take(run_of_row)
        arrays["row_before"] = self._before.to_arrow()
        arrays["row_after"] = self._after.to_arrow()
        if len(arrays["row_before"]) != n or len(arrays["row_after"]) != n:
            raise AssertionError(f"bronze batch: {n} rows but {len(arrays['row_before'])} "
                                 f"before / {len(arrays['row_after'])} after images")
        # the next batch starts with the room this one used (not the room it had: room
        # doubled once would double again each batch)
        self._sizes = {side: tuple(max(a, b + b // 8) for a, b in zip(_SINK_START, sink.used))
                       for side, sink in (("before", self._before), ("after", self._after))}
        idx = pa.array(c["tm_slot"], pa.int32()).take(run_of_row)
        facts = pa.array(c["facts_slot"], pa.int32()).take(run_of_row)
        small = {"column_count": pa.array([tm.column_count for tm in self._tms], pa.int32()),
                 "table_map_hash": pa.array(self._hashes, pa.int64())}
        per_tm = [_tm_values(tm) for tm in self._tms]
        for j, name in enumerate(TABLE_MAP_FIELDS):
            small[name] = pa.array([v[j] for v in per_tm], BRONZE_SCHEMA.field(name).type)
        for name, values in small.items():
            ftype = BRONZE_SCHEMA.field(name).type
            at = facts if name in TABLE_MAP_FIELDS else idx
            arrays[name] = pc.take(values, at) if per_tm else pa.nulls(n, ftype)
        batch = pa.RecordBatch.from_arrays([arrays[f.name] for f in BRONZE_SCHEMA],
                                           schema=BRONZE_SCHEMA)
        self._reset()
        return batch


class _Pseudo:
    """Header stand-in for the closing row (no event of its own)."""

    __slots__ = ("pos", "event_length", "timestamp", "server_id")

    def __init__(self, pos: int, timestamp: int) -> None:
        self.pos, self.event_length, self.timestamp, self.server_id = pos, 0, timestamp, None


def truncated_note(end_pos: int, open_trx: int | None, why: str) -> str:
    """The state of a closed file cut short, as ``status``, ``repair`` and the run name it."""
    note = f"partial: indexed up to pos {end_pos}, where the file is cut short ({why})"
    if open_trx is not None:
        note += (f"; the transaction from pos {open_trx} lacks its end: its rows before "
                 f"{end_pos} are in")
    return note + "; index the whole file again"


def file_batches(events: Iterable[ev.Event], batcher: BronzeBatcher, reader=None
                 ) -> Iterator[pa.RecordBatch]:
    """Feed ``events`` through ``batcher``, yielding full batches and, last, the closing row.

    A :class:`DecodeError` ends the file with an ERROR row (the rows decoded before it are
    kept: re-running the file replaces them); ``reader`` (a ``BinlogFileReader``) supplies
    the end position, whether the tail was an unfinished event, and the chunk it decoded
    (a file split among tasks has one closing row per chunk, ``row_in_event`` = chunk).
    """
    chunk = reader.chunk if reader is not None else 0
    chunks = reader.chunks if reader is not None else 1
    last_ts = 0
    try:
        for event in events:
            try:
                batcher.add(event)
            except DecodeError:
                if reader is not None:  # rows decoded here (columnar): the event was not read
                    reader.events -= 1
                raise
            last_ts = event.header.timestamp
            if batcher.full():
                yield batcher.flush()
    except DecodeError as exc:
        info = {"error": f"{type(exc).__name__}: {exc}", "chunk": chunk, "chunks": chunks,
                "events": reader.events if reader is not None else None}
        batcher.add_closing(ok=False, pos=exc.pos if exc.pos is not None else 0, info=info,
                            timestamp=last_ts, chunk=chunk)
    else:
        info: dict = {"events": reader.events if reader is not None else None,
                      "closed": bool(reader is not None and reader.closed_cleanly),
                      "chunk": chunk, "chunks": chunks}
        if reader is not None and reader.truncated:
            info["truncated"] = True
            info["note"] = truncated_note(reader.end_pos, batcher.trx_pos, reader.truncated)
        elif reader is not None and reader.partial_tail:
            info["note"] = ("unfinished tail (file still being written): indexed to the last "
                            "complete event")
        elif not info["closed"]:
            info["note"] = "no ROTATE/STOP at the end: the file may still be written"
        batcher.add_closing(ok=True, pos=reader.end_pos if reader is not None else 0,
                            info=info, timestamp=last_ts, chunk=chunk)
    batch = batcher.flush()
    if batch is not None:
        yield batch
