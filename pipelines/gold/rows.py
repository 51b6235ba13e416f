"""Pure: silver rows (Arrow) → gold values, and their two wire forms.

* :func:`gold_pk_values` is the rule for ``pk_values`` longer than gold's VARCHAR(512):
  the first characters (cut at an escape boundary), then the marker ``\\#``, then the
  SHA-256 of the *full* value (= silver's ``pk_hash``), 512 characters in all. Silver's
  escaping (``\\`` → ``\\\\``, ``|`` → ``\\|``) never puts a backslash before ``#``, so a
  marked value cannot equal any real one, and the full value's hash stays recoverable:
  ``RIGHT(pk_values, 64)``. Nothing is silently truncated; the count is reported.
* JSON columns go out as silver's text, byte for byte: no parse, so big integers and
  decimals keep every digit (MariaDB stores the text; MySQL's JSON type keeps 64-bit integers
  exact and turns other numbers into doubles — silver renders DECIMAL as strings).
* :func:`sql_rows` renders rows as ``(…)`` tuples for multi-row INSERT (backslash escapes on,
  see ``client.SESSION_SQL_MODE``); :func:`tsv_rows` as LOAD DATA lines (``\\t``-separated,
  ``\\``-escaped, ``\\N`` for NULL). Both are vectorised with pyarrow compute.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.compute as pc

from typing import Callable, Iterable, Mapping

from pipelines.gold.ddl import EVENT_COLUMNS, EVENT_TYPE_CODES
from pipelines.gold.digest import MAX_QUERY_TEXT_BYTES, gold_query_text

__all__ = ["PK_MAX_CHARS", "PK_MARK", "SILVER_INPUT", "gold_pk_values", "to_gold", "sql_rows",
           "tsv_rows"]

# What the export reads from silver: gold's columns less query_hash (asked of the server).
SILVER_INPUT = tuple(c for c in EVENT_COLUMNS if c != "query_hash")

PK_MAX_CHARS = 512
PK_MARK = "\\#"
_PREFIX_CHARS = PK_MAX_CHARS - len(PK_MARK) - 64

_INT_COLUMNS = {"start_pos", "end_pos", "row_in_event", "connection_id", "event_type",
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
    if pa.types.is_timestamp(arr.type):
        # tz-aware arrays hold UTC instants: dropping the zone keeps UTC wall-clock time.
        arr = arr.cast(pa.timestamp(arr.type.unit)).cast(pa.timestamp("s"), safe=False)
        return pc.strftime(arr, format="%Y-%m-%d %H:%M:%S")
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


def to_gold(batch: pa.RecordBatch, digests: Digests | None = None
            ) -> tuple[pa.RecordBatch, int]:
    """Silver columns (at least :data:`SILVER_INPUT`) → gold values; and how many
    ``pk_values`` were marked. ``digests`` maps statement texts to their query_hash
    (``digest.StatementDigests.lookup``; without it query_hash is NULL). Raises ValueError
    on an event_type gold cannot code."""
    cols = []
    marked = 0
    texts = None
    for name in EVENT_COLUMNS:
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
        cols.append(arr)
    return pa.RecordBatch.from_arrays(cols, names=list(EVENT_COLUMNS)), marked


def _escape(arr: pa.Array, pairs: tuple[tuple[str, str], ...]) -> pa.Array:
    for old, new in pairs:
        arr = pc.replace_substring(arr, old, new)
    return arr


_SQL_ESCAPES = (("\\", "\\\\"), ("'", "\\'"), ("\x00", "\\0"))
_TSV_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))


def _rendered(batch: pa.RecordBatch, *, sql: bool) -> list[pa.Array]:
    out = []
    null = "NULL" if sql else "\\N"
    for name, arr in zip(batch.schema.names, batch.columns):
        if name in _INT_COLUMNS:
            text = arr.cast(pa.string())
        else:
            text = _escape(arr.cast(pa.string()), _SQL_ESCAPES if sql else _TSV_ESCAPES)
            if sql:
                text = pc.binary_join_element_wise("'", text, "'", "")
        out.append(pc.fill_null(text, null))
    return out


def sql_rows(batch: pa.RecordBatch) -> list[str]:
    """Each gold row as an SQL tuple ``(v, …)`` in :data:`EVENT_COLUMNS` order."""
    cols = _rendered(batch, sql=True)
    rows = pc.binary_join_element_wise(*cols, ",")
    return pc.binary_join_element_wise("(", rows, ")", "").to_pylist()


def tsv_rows(batch: pa.RecordBatch) -> bytes:
    """The rows as a LOAD DATA file body (UTF-8, one ``\\n``-terminated line per row)."""
    cols = _rendered(batch, sql=False)
    lines = pc.binary_join_element_wise(*cols, "\t").to_pylist()
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
