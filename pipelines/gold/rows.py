"""Pure: silver rows (Arrow) → gold values, and their two wire forms.

* :func:`gold_pk_values` is the rule for ``pk_values`` longer than gold's VARCHAR(512):
  the first characters (cut at an escape boundary), then the marker ``\\#``, then the
  SHA-256 of the *full* value (= silver's ``pk_hash``), 512 characters in all. Silver's
  escaping (``\\`` → ``\\\\``, ``|`` → ``\\|``) never puts a backslash before ``#``, so a
  marked value cannot equal any real one, and the full value's hash stays recoverable:
  ``RIGHT(pk_values, 64)``. Nothing is silently truncated; the count is reported.
* ``event_id`` is computed from the row's place in its binlog (``event_ids.py``), so it
  follows binlog order whichever task writes the row, and a re-export writes the same id.
* JSON columns go out as silver's text, byte for byte: no parse, so big integers and
  decimals keep every digit (MariaDB stores the text; MySQL's JSON type keeps 64-bit integers
  exact and turns other numbers into doubles — silver renders DECIMAL as strings).
* :func:`sql_rows` renders rows as ``(…)`` tuples and :func:`sql_values` as one multi-row
  INSERT's ``VALUES`` list (backslash escapes on, see ``client.SESSION_SQL_MODE``);
  :func:`tsv_rows` as LOAD DATA lines (``\\t``-separated, ``\\``-escaped, ``\\N`` for NULL).
  All are vectorised with pyarrow compute; a column is escaped only in the rows that need it,
  and the bodies are the Arrow text buffers as they are, not a Python string per row.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from typing import Callable, Iterable, Iterator, Mapping

from pipelines.gold.ddl import EVENT_COLUMNS, EVENT_TYPE_CODES
from pipelines.gold.digest import MAX_QUERY_TEXT_BYTES, gold_query_text
from pipelines.gold.event_ids import event_ids, source_numbers
from pipelines.lake.tables import SILVER_EVENTS

__all__ = ["PK_MAX_CHARS", "PK_MARK", "SILVER_INPUT", "INT_COLUMNS", "gold_pk_values", "to_gold",
           "sql_rows", "sql_values", "tsv_rows", "byte_slices", "concat_body"]

# What the export reads from silver: gold's columns less event_id (computed) and query_hash
# (asked of the server).
SILVER_INPUT = tuple(c for c in EVENT_COLUMNS if c in SILVER_EVENTS.column_names)  # from silver


PK_MAX_CHARS = 512
PK_MARK = "\\#"
_PREFIX_CHARS = PK_MAX_CHARS - len(PK_MARK) - 64

# Gold's integer columns: unquoted in the INSERT text, LONGLONG in the bulk protocol (bulk.py).
INT_COLUMNS = {"event_id", "schema_version", "start_pos", "end_pos", "row_in_event", "connection_id", "event_type",
                "commit_ts_us"}


def gold_pk_values(pk: str | None) -> str | None:
    """``pk`` when it fits VARCHAR(512), else its marked form (module docstring)."""
    if pk is None or len(pk) <= PK_MAX_CHARS:
        return pk
    digest = hashlib.sha256(pk.encode("utf-8")).hexdigest()
    prefix = pk[:_PREFIX_CHARS]
    trailing = len(prefix) - len(prefix.rstrip("\\"))
    if trailing % 2:  # the cut split a `\x` escape pair: drop its lone backslash
        prefix = prefix[:-1]
    return prefix + PK_MARK + digest


def _pk_column(arr: pa.Array) -> tuple[pa.Array, int]:
    lengths = pc.fill_null(pc.utf8_length(arr), 0)
    long_rows = pc.indices_nonzero(pc.greater(lengths, PK_MAX_CHARS)).to_pylist()
    if not long_rows:
        return arr, 0
    values = arr.to_pylist()
    for i in long_rows:
        values[i] = gold_pk_values(values[i])
    return pa.array(values, pa.string()), len(long_rows)


def _event_type(arr: pa.Array) -> pa.Array:
    names = list(EVENT_TYPE_CODES)
    idx = pc.index_in(arr, value_set=pa.array(names))
    if idx.null_count:
        bad = pc.filter(arr, pc.is_null(idx)).to_pylist()[:3]
        raise ValueError(f"event_type not INSERT/UPDATE/DELETE: {bad}")
    return pc.take(pa.array([EVENT_TYPE_CODES[n] for n in names], pa.int8()), idx)


def _timestamp_text(arr: pa.Array) -> pa.Array:
    """``YYYY-MM-DD HH:MM:SS`` of each instant (UTC wall-clock time, fractions dropped), as
    DATETIME takes it. Each distinct second is formatted once (a binlog's row changes share
    their events' seconds; ``pc.strftime`` formats value by value)."""
    if pa.types.is_timestamp(arr.type):
        # tz-aware arrays hold UTC instants: dropping the zone keeps UTC wall-clock time.
        arr = arr.cast(pa.timestamp(arr.type.unit)).cast(pa.timestamp("s"), safe=False)
        seconds = pc.dictionary_encode(arr)
        texts = pc.strftime(seconds.dictionary, format="%Y-%m-%d %H:%M:%S")
        return texts.take(seconds.indices)
    return arr.cast(pa.string())


def _query_text(arr: pa.Array) -> pa.Array:
    long_rows = pc.indices_nonzero(pc.fill_null(
        pc.greater(pc.binary_length(arr), MAX_QUERY_TEXT_BYTES), False)).to_pylist()
    if not long_rows:
        return arr
    values = arr.to_pylist()
    for i in long_rows:
        values[i] = gold_query_text(values[i])
    return pa.array(values, pa.string())


Digests = Callable[[Iterable[str | None]], Mapping[str, str | None]]


def _schema_version(arr: pa.Array, versions: Mapping[str, int]) -> pa.Array:
    """Silver's snapshot ids → their gold numbers (``snapshots.py``); 0 for ``binlog`` (the
    binlog's own metadata) and for an id gold holds no snapshot of."""
    enc = pc.dictionary_encode(arr.cast(pa.string()))
    nums = np.array([versions.get(v, 0) if v is not None else 0
                     for v in enc.dictionary.to_pylist()] or [0], dtype=np.int64)
    idx = pc.fill_null(enc.indices, 0).to_numpy(zero_copy_only=False)
    return pa.array(nums[idx])


def to_gold(batch: pa.RecordBatch, digests: Digests | None = None,
            sources: Mapping[tuple[str, str], int] | None = None,
            versions: Mapping[str, int] | None = None) -> tuple[pa.RecordBatch, int]:
    """Silver columns (at least :data:`SILVER_INPUT`) → gold values; and how many
    ``pk_values`` were marked. ``digests`` maps statement texts to their query_hash
    (``digest.StatementDigests.lookup``; without it query_hash is NULL); ``sources`` each
    ``(source_id, binlog base)`` to its number in gold (``ddl.source_numbers``; without it a
    batch of one such key is source 1); ``versions`` each silver snapshot id to its gold number
    (``snapshots.copy_snapshots``; without it every schema_version is 0). Raises ValueError on an event_type gold cannot code and
    EventIdError on a row ``event_id`` cannot place."""
    cols = []
    marked = 0
    texts = None
    for name in EVENT_COLUMNS:
        if name == "event_id":
            cols.append(event_ids(
                batch.column("binlog_file"), batch.column("start_pos"),
                batch.column("end_pos"), batch.column("row_in_event"),
                source_numbers(batch.column("source_id"), batch.column("binlog_file"),
                               sources)))
            continue
        if name == "query_hash":
            found = digests(texts.to_pylist()) if digests is not None else {}
            cols.append(pa.array([found.get(t) if t is not None else None
                                  for t in texts.to_pylist()], pa.string()))
            continue
        arr = batch.column(name)  # KeyError names a missing silver column
        if name == "query_text":
            arr = texts = _query_text(arr.cast(pa.string()))
        elif name == "event_timestamp":
            arr = _timestamp_text(arr)
        elif name == "event_type":
            arr = _event_type(arr)
        elif name == "pk_values":
            arr, marked = _pk_column(arr)
        elif name == "schema_version":
            arr = _schema_version(arr, versions or {})
        cols.append(arr)
    return pa.RecordBatch.from_arrays(cols, names=list(EVENT_COLUMNS)), marked


def _escape(arr: pa.Array, pairs: tuple[tuple[str, str], ...]) -> pa.Array:
    """``arr`` with each ``old`` replaced by ``new``; only the rows holding one of the
    ``old`` characters are rewritten (one scan finds them; most JSON images hold none)."""
    need = pc.fill_null(pc.match_substring_regex(arr, _any_of(pairs)), False)
    hits = pc.sum(need).as_py() or 0
    if hits == 0:
        return arr
    rows = arr if hits == len(arr) else pc.filter(arr, need)
    for old, new in pairs:
        rows = pc.replace_substring(rows, old, new)
    return rows if hits == len(arr) else pc.replace_with_mask(arr, need, rows)


def _any_of(pairs: tuple[tuple[str, str], ...]) -> str:
    return "[" + "".join(f"\\x{ord(old):02x}" for old, _ in pairs) + "]"


_SQL_ESCAPES = (("\\", "\\\\"), ("'", "\\'"), ("\x00", "\\0"))
_TSV_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))


def _row_texts(batch: pa.RecordBatch, *, sql: bool, end: str = "") -> pa.Array:
    """Each row as its wire text (an SQL tuple ``(…)`` or a TSV line), followed by ``end``.

    One join writes every row: the columns' texts with the quotes and separators between
    them as pieces, a NULL written by the join itself (``NULL`` unquoted, ``\\N``). So a
    column's text is copied once, into its rows, however large its JSON."""
    pieces: list = ["("] if sql else []
    for i, (name, arr) in enumerate(zip(batch.schema.names, batch.columns)):
        if i:
            pieces.append("," if sql else "\t")
        text = arr.cast(pa.string())
        if name in INT_COLUMNS:
            pieces.append(pc.fill_null(text, "NULL") if sql else text)
            continue
        text = _escape(text, _SQL_ESCAPES if sql else _TSV_ESCAPES)
        if not sql:  # unquoted: the join's replacement is the whole NULL
            pieces.append(text)
        elif text.null_count == 0:
            pieces += ["'", text, "'"]
        else:  # the quotes around a value, NULL in their place: the text's NULL writes ""
            valid = pc.is_valid(text)
            pieces += [pc.if_else(valid, "'", "NULL"), text, pc.if_else(valid, "'", "")]
    pieces.append(")" + end if sql else "\n" + end)
    return pc.binary_join_element_wise(
        *pieces, "", null_handling="replace", null_replacement="" if sql else "\\N")


def sql_rows(batch: pa.RecordBatch) -> list[str]:
    """Each gold row as an SQL tuple ``(v, …)`` in :data:`EVENT_COLUMNS` order."""
    return _row_texts(batch, sql=True).to_pylist()


def sql_values(batch: pa.RecordBatch, max_bytes: int | None = None) -> list[bytes]:
    """The rows as multi-row ``VALUES`` lists, ``(…),(…)`` (UTF-8), in order: one list, or
    with ``max_bytes`` as many as keep each within it (a row longer than that alone)."""
    n = batch.num_rows
    if n == 0:
        return []
    items = _row_texts(batch, sql=True, end=",")  # each row with its comma
    out = []
    for rows in byte_slices(items, max_bytes):
        body = concat_body(rows)
        out.append(body.slice(0, body.size - 1).to_pybytes())  # no comma after the last
    return out


def byte_slices(items: pa.Array, max_bytes: int | None) -> Iterator[pa.Array]:
    """Consecutive slices of the binary or string array ``items`` in order: one, or with
    ``max_bytes`` as many as keep each slice's bytes within it (an item longer alone)."""
    n = len(items)
    ends = np.cumsum(pc.binary_length(items).to_numpy(zero_copy_only=False))
    start = 0
    while start < n:
        stop = n
        if max_bytes is not None:
            before = int(ends[start - 1]) if start else 0
            stop = max(int(np.searchsorted(ends, before + max_bytes, side="right")), start + 1)
        yield items.slice(start, stop - start)
        start = stop


def tsv_rows(batch: pa.RecordBatch) -> bytes:
    """The rows as a LOAD DATA file body (UTF-8, one ``\\n``-terminated line per row)."""
    if batch.num_rows == 0:
        return b""
    return concat_body(_row_texts(batch, sql=False)).to_pybytes()


def concat_body(texts: pa.Array) -> pa.Buffer:
    """The texts one after another: the string array's data buffer as it is (each text
    already ends in its separator), without a Python string per row."""
    _, offsets, data = texts.buffers()
    ends = np.frombuffer(offsets, np.int32)[[texts.offset, texts.offset + len(texts)]]
    return data.slice(int(ends[0]), int(ends[1] - ends[0]))
