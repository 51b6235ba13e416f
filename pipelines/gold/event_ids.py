"""Pure: gold's ``event_id``, a row change's place in its source's binlog as one integer.

bintrail's readers order a key's history by ``(event_timestamp, event_id)`` (its query
builder's ``ORDER BY`` and its Go-side sort) and page by ``event_id``; its own ``event_id`` is
an AUTO_INCREMENT filled in binlog order by one writer. binlake's export writes from several
tasks at once, so an AUTO_INCREMENT would number rows in the order the tasks happened to
write them (seen: 1,836 of 5,019 rows out of ``row_in_event`` order). Instead each row's
``event_id`` is computed from where it sits in the binlog, the same on every run, task and
re-export::

    event_id = ((source_number << 20 | file_number) << 32 | start_pos) << 8  +  row_in_event

63 bits (it stays a positive signed 64-bit integer: Arrow, Spark and the bulk protocol's
LONGLONG carry it unchanged): 3 bits of source number (1–7, ``binlake_sources``: a gold
database numbers each ``(source_id, binlog base name)`` it receives, so ``mysql-bin.000042``
and ``relay-bin.000042`` of one source never share ids), 20 bits of the binlog file's number
(``mysql-bin.000042`` → 42; up to 1,048,575), 32 bits of the event's start position
(positions are 32-bit in the event header), then 8 bits of room *per byte of the event*.

Why ``<< 8 + row_in_event`` and not ``<< 8 | row_in_event``: the rows of one event number
from 0 and one event can hold many more than 256 (a MySQL TRANSACTION_PAYLOAD numbers all of
a transaction's rows under the payload's position). The next event starts at or after this
one's ``end_pos``, so the ids stay in order and distinct as long as ``row_in_event <
(end_pos - start_pos) << 8``: 256 rows per byte of the event as logged. An uncompressed
row takes at least one byte, so this always holds there; it fails only for a compressed
event whose rows shrank more than 256-fold. A row outside any of these bounds raises
:class:`EventIdError` (the export stops, nothing is silently renumbered or lost).

Rows of different sources never share an id (the source number is the top bits); within a
source's binlogs, ``event_id`` ascends with ``(file number, start_pos, row_in_event)``.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog.names import file_number, split_binlog_name
from pipelines.errors import EventIdError

__all__ = ["SOURCE_BITS", "FILE_BITS", "POS_BITS", "ROW_SHIFT", "MAX_SOURCES", "FIRST_ID",
           "EventIdError", "SourceKey", "binlog_base", "event_id", "event_ids", "source_numbers",
           "event_id_sql", "binlog_base_sql"]

SourceKey = tuple[str, str]  # (source_id, binlog base name): what a source number names

SOURCE_BITS, FILE_BITS, POS_BITS, ROW_SHIFT = 3, 20, 32, 8
MAX_SOURCES = (1 << SOURCE_BITS) - 1
# Every computed id is at least this (source numbers start at 1); ids below it are
# AUTO_INCREMENT values of a gold table filled before (``ddl.renumber_events`` rewrites them).
FIRST_ID = 1 << (FILE_BITS + POS_BITS + ROW_SHIFT)


def event_id(source_number: int, binlog_file: str, start_pos: int, end_pos: int,
             row_in_event: int) -> int:
    """One row's ``event_id`` (the scalar form of :func:`event_ids`, for tests and tools)."""
    arr = event_ids(pa.array([binlog_file]), pa.array([start_pos], pa.int64()),
                    pa.array([end_pos], pa.int64()), pa.array([row_in_event], pa.int64()),
                    pa.array([source_number], pa.int64()))
    return arr[0].as_py()


def _numbers(files: pa.Array) -> np.ndarray:
    """Each row's binlog file number; one parse per distinct name."""
    enc = pc.dictionary_encode(files.cast(pa.string()))
    names = enc.dictionary.to_pylist()
    nums = np.array([file_number(n or "") for n in names], dtype=np.int64)
    return nums[enc.indices.to_numpy(zero_copy_only=False)]


def binlog_base(name: str) -> str:
    """``mysql-bin.000042`` → ``mysql-bin``; a name without a number is its own base."""
    parts = split_binlog_name(name or "")
    return parts[0] if parts else (name or "")


def source_numbers(source_ids: pa.Array, binlog_files: pa.Array,
                   numbers: Mapping[SourceKey, int] | None) -> pa.Array:
    """Each row's source number: its ``(source_id, binlog base)`` in ``numbers``
    (``ddl.source_numbers``). Without ``numbers`` (tests, benches) a batch of one such key
    is source 1. EventIdError for a key the mapping lacks."""
    sid = pc.dictionary_encode(pc.fill_null(source_ids.cast(pa.string()), "default"))
    fil = pc.dictionary_encode(binlog_files.cast(pa.string()))
    sid_names, file_names = sid.dictionary.to_pylist(), fil.dictionary.to_pylist()
    pair = (sid.indices.to_numpy(zero_copy_only=False).astype(np.int64) * len(file_names)
            + fil.indices.to_numpy(zero_copy_only=False))
    codes, inverse = np.unique(pair, return_inverse=True)  # one lookup per distinct pair
    keys = [(sid_names[c // len(file_names)], binlog_base(file_names[c % len(file_names)]))
            for c in codes.tolist()]
    if numbers is None:
        if len(set(keys)) > 1:
            raise EventIdError(f"rows of {len(set(keys))} sources/binlog names and no source "
                               "numbers given")
        numbers = {k: 1 for k in keys}
    missing = [k for k in keys if k not in numbers]
    if missing:
        raise EventIdError(f"source_id {missing[0][0]!r} with binlogs {missing[0][1]!r} has "
                           "no number in gold's binlake_sources")
    return pa.array(np.array([numbers[k] for k in keys], np.int64)[inverse.reshape(-1)])


def event_ids(binlog_file: pa.Array, start_pos: pa.Array, end_pos: pa.Array,
              row_in_event: pa.Array, source_number: pa.Array) -> pa.Array:
    """Every row's ``event_id`` (int64), vectorised; EventIdError naming the first row whose
    source number, file number, position or row index is out of bounds."""
    n = len(binlog_file)
    if n == 0:
        return pa.array([], pa.int64())
    src = pc.fill_null(source_number.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    files = _numbers(binlog_file)
    start = pc.fill_null(start_pos.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    end = pc.fill_null(end_pos.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    row = pc.fill_null(row_in_event.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    room = np.maximum(end - start, 1) << ROW_SHIFT
    bad = ((src < 1) | (src > MAX_SOURCES) | (files < 0) | (files >= 1 << FILE_BITS)
           | (start < 0) | (start >= 1 << POS_BITS) | (row < 0) | (row >= room))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise EventIdError(
            f"event_id cannot place {binlog_file[i].as_py()}:{start[i]} row {row[i]} "
            f"(end_pos {end[i]}, source number {src[i]}): gold's event_id holds source "
            f"numbers 1-{MAX_SOURCES}, file numbers below {1 << FILE_BITS}, positions below "
            f"2^{POS_BITS} and {1 << ROW_SHIFT} rows per byte of an event (docs/gold.md)")
    ids = ((((src << FILE_BITS) | files) << POS_BITS | start) << ROW_SHIFT) + row
    return pa.array(ids, pa.int64())


def binlog_base_sql(column: str = "binlog_file") -> str:
    """:func:`binlog_base` in SQL (the text before the last dot when a number follows it)."""
    return (f"CASE WHEN {column} REGEXP '\\\\.[0-9]+$' THEN LEFT({column}, CHAR_LENGTH({column}) "
            f"- CHAR_LENGTH(SUBSTRING_INDEX({column}, '.', -1)) - 1) ELSE {column} END")


def event_id_sql(source_number: str = "s.source_number") -> str:
    """The same formula in SQL over a ``binlog_events`` row (for renumbering rows a gold
    table numbered by AUTO_INCREMENT before); ``source_number`` is the SQL of its number."""
    num = ("CASE WHEN binlog_file REGEXP '\\\\.[0-9]+$' THEN "
           "CAST(SUBSTRING_INDEX(binlog_file, '.', -1) AS UNSIGNED) ELSE 0 END")
    return (f"(((({source_number} << {FILE_BITS}) | {num}) << {POS_BITS} | start_pos) "
            f"<< {ROW_SHIFT}) + row_in_event")
