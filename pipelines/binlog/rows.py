"""WRITE/UPDATE/DELETE rows events (v0 pre-GA, v1, v2, MySQL partial JSON, MariaDB
compressed): row images in binlog order.

Layout (MySQL ``Rows_log_event``): post-header table_id (6 bytes; 4 in old formats) and flags
u16 and, for v2, an extra-data block (u16 length that counts itself). Body: column count
(packed int), the columns-present bitmap (for UPDATE v1/v2 a second one for the after image;
pre-GA UPDATE events have one for both), then rows: per image a NULL bitmap over the
*present* columns followed by the present non-NULL values.

MariaDB ``*_ROWS_COMPRESSED`` (166–171): the rows part (after the bitmaps) is one compressed
block (:func:`~pipelines.binlog.events.maria_uncompress`). MySQL PARTIAL_UPDATE_ROWS (39,
``binlog_row_value_options=PARTIAL_JSON``): every after image starts with a packed int of
value options and, when bit 1 (PARTIAL_JSON_UPDATES) is set, a bitmap over the table's JSON
columns; a JSON column whose bit is set holds a diff (``json_diff.py``) instead of a document.
"""

from __future__ import annotations

import struct
from typing import Callable

from pipelines.binlog import coltypes as T
from pipelines.binlog.fast import rowkernel
from pipelines.binlog.events import EventType as E
from pipelines.binlog.events import PendingRows, RowsEvent, maria_uncompress
from pipelines.binlog.packed_ints import read_packed_int
from pipelines.binlog.framing import EventHeader
from pipelines.binlog.json_diff import JsonDiffError, apply_json_diff, read_json_diff
from pipelines.binlog.fast.rowcodegen import RowsFn, image_function, rows_function
from pipelines.binlog.table_map import TableMap
from pipelines.errors import DecodeError, MissingTableMapError, TruncatedError
from pipelines.vocabulary import DELETE, INSERT, UPDATE

__all__ = ["ROWS_KINDS", "decode_rows", "python_rows", "STMT_END_F"]

ROWS_KINDS: dict[int, str] = {
    E.PRE_GA_WRITE_ROWS: INSERT, E.PRE_GA_UPDATE_ROWS: UPDATE, E.PRE_GA_DELETE_ROWS: DELETE,
    E.WRITE_ROWS_V1: INSERT, E.UPDATE_ROWS_V1: UPDATE, E.DELETE_ROWS_V1: DELETE,
    E.WRITE_ROWS: INSERT, E.UPDATE_ROWS: UPDATE, E.DELETE_ROWS: DELETE,
    E.PARTIAL_UPDATE_ROWS: UPDATE,
    E.MARIA_WRITE_ROWS_COMPRESSED_V1: INSERT, E.MARIA_UPDATE_ROWS_COMPRESSED_V1: UPDATE,
    E.MARIA_DELETE_ROWS_COMPRESSED_V1: DELETE,
    E.MARIA_WRITE_ROWS_COMPRESSED: INSERT, E.MARIA_UPDATE_ROWS_COMPRESSED: UPDATE,
    E.MARIA_DELETE_ROWS_COMPRESSED: DELETE,
}
_V2 = frozenset({E.WRITE_ROWS, E.UPDATE_ROWS, E.DELETE_ROWS, E.PARTIAL_UPDATE_ROWS,
                 E.MARIA_WRITE_ROWS_COMPRESSED, E.MARIA_UPDATE_ROWS_COMPRESSED,
                 E.MARIA_DELETE_ROWS_COMPRESSED})
_COMPRESSED = frozenset(range(E.MARIA_WRITE_ROWS_COMPRESSED_V1,
                              E.MARIA_DELETE_ROWS_COMPRESSED + 1))
_PRE_GA = frozenset({E.PRE_GA_WRITE_ROWS, E.PRE_GA_UPDATE_ROWS, E.PRE_GA_DELETE_ROWS})
_ONE_BITMAP_UPDATE = frozenset({E.PRE_GA_UPDATE_ROWS})
STMT_END_F = 0x0001
PARTIAL_JSON_UPDATES = 0x1
_DUMMY_TABLE_IDS = frozenset({0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFF})
_OLD_TEMPORAL = frozenset({T.TIMESTAMP, T.DATETIME, T.TIME})


def _present(buf: bytes, pos: int, ncols: int) -> tuple[list[bool] | None, int]:
    nbytes = (ncols + 7) >> 3
    full = (1 << ncols) - 1
    bits = int.from_bytes(buf[pos:pos + nbytes], "little") & full  # unused bits may be set
    if bits == full:
        return None, pos + nbytes
    return [bool(bits >> i & 1) for i in range(ncols)], pos + nbytes


def _count(present: list[bool] | None, ncols: int) -> int:
    return ncols if present is None else sum(present)


def _columns(tm: TableMap, present: list[bool] | None) -> list[tuple[int, object]]:
    decs = tm.decoders()
    if present is None:
        return list(enumerate(decs))
    return [(i, d) for i, d in enumerate(decs) if present[i]]


def _image_fn(tm: TableMap, present: list[bool] | None) -> Callable[[bytes, int], tuple]:
    """The row-image function ``image(buf, pos) -> (values, new_pos)`` for these columns
    (PARTIAL_UPDATE_ROWS before images; other events use :func:`_rows_fn`).

    Generated code (``rowcodegen.py``) built once per table content and columns-present
    bitmap; it falls back to :func:`_image` (the reference) for anything unusual.
    """
    cache = tm.image_cache()
    key = ("image", None if present is None else tuple(present))
    fn = cache.get(key)
    if fn is None:
        cols = _columns(tm, present)
        ncols = tm.column_count
        nbytes = (len(cols) + 7) >> 3

        def reference(buf: bytes, pos: int) -> tuple[list, int]:
            return _image(buf, pos, cols, ncols, nbytes)

        compiled = cache.get("compiled", 0)
        if compiled >= _MAX_LOOPS:
            return reference
        cache["compiled"] = compiled + 1
        fn = cache[key] = image_function(
            tm.column_types, tm.column_meta, tm.unsigned, tm.decoders(), [i for i, _ in cols],
            ncols, reference, label=f"row image {tm.schema}.{tm.table}") or reference
    return fn


# Generated loops per table content: at most this many column sets (MINIMAL row images can
# name many), each compiled when seen a second time (a set seen once is not worth it).
_MAX_LOOPS = 64
_MAX_SEEN = 4096


def _rows_fn(tm: TableMap, kind: str, present_a: list[bool] | None,
             present_b: list[bool] | None) -> RowsFn | None:
    """The generated loop over the rows of an INSERT/DELETE/UPDATE event of these columns
    (``rowcodegen.rows_function``), or ``None``: use the reference loop."""
    cache = tm.image_cache()
    key = (kind, None if present_a is None else tuple(present_a),
           None if kind != UPDATE or present_b is None else tuple(present_b))
    fn = cache.get(key, 0)
    if fn is None or callable(fn):
        return fn
    if fn == 0:  # first sighting
        if len(cache) < _MAX_SEEN:
            cache[key] = 1
        return None
    compiled = cache.get("compiled", 0)
    if compiled >= _MAX_LOOPS:
        return None
    cache["compiled"] = compiled + 1
    cols_a = [i for i, _ in _columns(tm, present_a)]
    cols_b = [i for i, _ in _columns(tm, present_b)] if kind == UPDATE else None
    fn = cache[key] = rows_function(
        tm.column_types, tm.column_meta, tm.unsigned, tm.decoders(), tm.column_count, kind,
        cols_a, cols_b, label=f"rows {kind} {tm.schema}.{tm.table}")
    return fn


def _image(buf: bytes, pos: int, cols: list, ncols: int, nbytes: int) -> tuple[list, int]:
    """Decode one row image starting at its NULL bitmap; return (values, new_pos).

    The reference decoding, one decoder call per value; the hot loops use :func:`_image_fn`.
    """
    nulls = int.from_bytes(buf[pos:pos + nbytes], "little")
    pos += nbytes
    row: list = [None] * ncols
    if not nulls:
        for idx, dec in cols:
            row[idx], pos = dec(buf, pos)
    else:
        bit = 1
        for idx, dec in cols:
            if not nulls & bit:
                row[idx], pos = dec(buf, pos)
            bit <<= 1
    return row, pos


def decode_rows(
    header: EventHeader, body: bytes, post_header_len: int, table_maps: dict[int, TableMap],
    *, columnar: bool = False
) -> RowsEvent | None:
    """Decode a rows event body (checksum trailer removed) with the table map it names.

    ``columnar``: when the compiled row loop is available (``rowkernel``), leave the rows
    undecoded (``RowsEvent.pending``) for the bronze batcher to decode straight into its Arrow
    buffers (``rows_columnar.decode_into``); the header, TABLE_MAP, column count and bitmaps
    are still checked here.

    Returns ``None`` for MySQL's dummy rows event (no table, no rows). Raises
    :class:`MissingTableMapError` when the table_id has no TABLE_MAP, :class:`TruncatedError`
    when a value runs past the event end, :class:`DecodeError` when the column count differs
    from the TABLE_MAP's or a compressed block is malformed.
    """
    type_code = header.type_code
    preview = body[:32]
    id_len = 4 if post_header_len == 6 else 6
    table_id = int.from_bytes(body[:id_len], "little")
    flags = body[id_len] | body[id_len + 1] << 8
    pos = id_len + 2
    if type_code in _V2:
        extra_len = body[pos] | body[pos + 1] << 8
        pos += max(extra_len, 2)
    tm = table_maps.get(table_id)
    if tm is None:
        if table_id in _DUMMY_TABLE_IDS:
            return None
        raise MissingTableMapError(f"rows event for table_id {table_id} without a TABLE_MAP",
                                   preview=body[:32])
    kind = ROWS_KINDS[type_code]
    ncols, pos = read_packed_int(body, pos)
    if ncols != tm.column_count:
        raise DecodeError(
            f"rows event has {ncols} columns but TABLE_MAP of {tm.schema}.{tm.table} has "
            f"{tm.column_count}", preview=body[:32])
    present_a, pos = _present(body, pos, ncols)
    present_b = present_a
    if kind == UPDATE and type_code not in _ONE_BITMAP_UPDATE:
        present_b, pos = _present(body, pos, ncols)
    if pos > len(body):
        raise TruncatedError("columns-present bitmaps run past the event end")
    if type_code in _COMPRESSED:
        body = maria_uncompress(body, pos)
        pos = 0
    end = len(body)
    if pos < end and not _count(present_a, ncols) \
            and (kind != UPDATE or not _count(present_b, ncols)) \
            and type_code != E.PARTIAL_UPDATE_ROWS:
        # An image of no columns takes no bytes: the row bytes could never be consumed.
        raise DecodeError(f"rows event of {tm.schema}.{tm.table} has row bytes but no column "
                          "in its columns-present bitmaps", preview=body[:32])
    if type_code in _PRE_GA:
        cols_a = _columns(tm, present_a)
        cols_b = cols_a if present_b is present_a else _columns(tm, present_b)
        rows = _pre_ga_rows(body, pos, kind, tm, cols_a, cols_b, ncols)
        return RowsEvent(header, kind, table_id, flags, tm, rows,
                         None if kind == INSERT else present_a,
                         None if kind == DELETE else present_b)
    if columnar and type_code != E.PARTIAL_UPDATE_ROWS and rowkernel.available():
        # Decoded later, straight into the batch's Arrow buffers (rows_columnar.py).
        event = RowsEvent(header, kind, table_id, flags, tm, [],
                          None if kind == INSERT else present_a,
                          None if kind == DELETE else present_b)
        event.pending = PendingRows(type_code, body, pos, preview)
        return event
    rows, partial = python_rows(tm, kind, type_code, body, pos, present_a, present_b)
    if kind == INSERT:
        return RowsEvent(header, kind, table_id, flags, tm, rows, None, present_a)
    if kind == DELETE:
        return RowsEvent(header, kind, table_id, flags, tm, rows, present_a, None)
    return RowsEvent(header, kind, table_id, flags, tm, rows, present_a, present_b,
                     partial_json_flags=partial)


def python_rows(tm: TableMap, kind: str, type_code: int, body: bytes, pos: int,
                present_a: list[bool] | None, present_b: list[bool] | None
                ) -> tuple[list, list | None]:
    """The rows of a (non pre-GA) rows event from ``pos``, decoded in Python: (rows, the
    PARTIAL_UPDATE_ROWS unresolved-JSON flags or ``None``). Raises like :func:`decode_rows`."""
    ncols = tm.column_count
    rows: list = []
    append = rows.append
    partial = None
    end = len(body)
    try:
        if type_code == E.PARTIAL_UPDATE_ROWS:
            partial = []
            image_a = _image_fn(tm, present_a)
            json_cols = [i for i, t in enumerate(tm.column_types) if t == T.JSON]
            cols_b = _columns(tm, present_b)
            nbytes_b = (len(cols_b) + 7) >> 3
            while pos < end:
                before, pos = image_a(body, pos)
                after, pos, unresolved = _partial_after(body, pos, tm, before, present_a,
                                                        cols_b, ncols, nbytes_b, json_cols)
                append((before, after))
                partial.append(unresolved)
        else:
            loop = _rows_fn(tm, kind, present_a, present_b)
            if loop is not None:
                pos = loop(body, pos, end, append)
            if pos < end:
                # What the generated loop left (from a row it could not vouch for): the
                # reference decodes it, raising its error, or goes on.
                cols_a = _columns(tm, present_a)
                nbytes_a = (len(cols_a) + 7) >> 3
                if kind == INSERT:
                    while pos < end:
                        after, pos = _image(body, pos, cols_a, ncols, nbytes_a)
                        append((None, after))
                elif kind == DELETE:
                    while pos < end:
                        before, pos = _image(body, pos, cols_a, ncols, nbytes_a)
                        append((before, None))
                else:
                    cols_b = _columns(tm, present_b)
                    nbytes_b = (len(cols_b) + 7) >> 3
                    while pos < end:
                        before, pos = _image(body, pos, cols_a, ncols, nbytes_a)
                        after, pos = _image(body, pos, cols_b, ncols, nbytes_b)
                        append((before, after))
    except (IndexError, struct.error) as exc:
        raise TruncatedError(f"row {len(rows)} of {tm.schema}.{tm.table} runs past the event end"
                             + _hint(tm), preview=body[pos:pos + 32]) from exc
    except DecodeError as exc:
        exc.reason = f"row {len(rows)} of {tm.schema}.{tm.table}: {exc.reason}{_hint(tm)}"
        raise
    if pos != end:
        raise TruncatedError(f"last row of {tm.schema}.{tm.table} runs past the event end"
                             + _hint(tm))
    return rows, partial


def _pre_ga_rows(body: bytes, pos: int, kind: str, tm: TableMap, cols_a: list, cols_b: list,
                 ncols: int) -> list:
    """Rows of a pre-GA (5.1 development trees) rows event.

    Their NULL bitmap is the table record's null bytes (``unpack_row_old``), where a MyISAM
    table with fixed-length rows keeps bit 0 for itself: the column bits start at 0 or at 1
    depending on the engine, which the event does not say. Both are tried; the one whose rows
    tile the event exactly wins (the first, when both do).
    """
    failure: DecodeError | None = None
    for shift in (0, 1):
        rows: list = []
        p = pos
        try:
            while p < len(body):
                if kind == INSERT:
                    after, p = _image_shifted(body, p, cols_a, ncols, shift)
                    rows.append((None, after))
                elif kind == DELETE:
                    before, p = _image_shifted(body, p, cols_a, ncols, shift)
                    rows.append((before, None))
                else:
                    before, p = _image_shifted(body, p, cols_a, ncols, shift)
                    after, p = _image_shifted(body, p, cols_b, ncols, shift)
                    rows.append((before, after))
        except (IndexError, struct.error):
            failure = failure or TruncatedError(
                f"row {len(rows)} of {tm.schema}.{tm.table} runs past the event end")
            continue
        except DecodeError as exc:
            failure = failure or exc
            continue
        if p == len(body):
            return rows
        failure = failure or TruncatedError(
            f"last row of {tm.schema}.{tm.table} runs past the event end")
    assert failure is not None
    raise failure


def _image_shifted(buf: bytes, pos: int, cols: list, ncols: int, shift: int) -> tuple[list, int]:
    nbytes = (len(cols) + shift + 7) >> 3
    if pos + nbytes > len(buf):
        raise TruncatedError("NULL bitmap runs past the event end")
    nulls = int.from_bytes(buf[pos:pos + nbytes], "little") >> shift
    pos += nbytes
    row: list = [None] * ncols
    bit = 1
    for idx, dec in cols:
        if not nulls & bit:
            row[idx], pos = dec(buf, pos)
        bit <<= 1
    return row, pos


def _hint(tm: TableMap) -> str:
    """Why a MariaDB 5.3–10.0 table with old-format temporal columns may not decode."""
    if not any(t in _OLD_TEMPORAL for t in tm.column_types):
        return ""
    return ("; note: MariaDB 5.3–10.0 (mysql56_temporal_format=OFF) logs TIMESTAMP/DATETIME/"
            "TIME columns with fractional seconds under their old type codes without the "
            "precision, so their width cannot be known from the binlog alone (mariadb-binlog "
            "cannot read such rows either)")


def _partial_after(buf: bytes, pos: int, tm: TableMap, before: list, present_before,
                   cols: list, ncols: int, nbytes: int, json_cols: list[int]
                   ) -> tuple[list, int, tuple[int, ...]]:
    """One PARTIAL_UPDATE_ROWS after image; JSON diffs applied to the before image's JSON.

    Returns (values, new_pos, columns whose JSON could not be rebuilt).
    """
    options, pos = read_packed_int(buf, pos)
    diff_cols: set[int] = set()
    if options & PARTIAL_JSON_UPDATES:
        nb = (len(json_cols) + 7) >> 3
        bits = int.from_bytes(buf[pos:pos + nb], "little")
        if pos + nb > len(buf):
            raise TruncatedError("partial JSON bitmap runs past the event end")
        pos += nb
        diff_cols = {c for k, c in enumerate(json_cols) if bits >> k & 1}
    if not diff_cols:
        row, pos = _image(buf, pos, cols, ncols, nbytes)
        return row, pos, ()
    nulls = int.from_bytes(buf[pos:pos + nbytes], "little")
    pos += nbytes
    row: list = [None] * ncols
    unresolved = []
    bit = 1
    for idx, dec in cols:
        if not nulls & bit:
            if idx in diff_cols:
                diffs, pos = read_json_diff(buf, pos)
                base = before[idx] if before is not None and (
                    present_before is None or present_before[idx]) else None
                try:
                    row[idx] = None if base is None else apply_json_diff(base, diffs)
                except JsonDiffError:
                    row[idx] = None
                if row[idx] is None:
                    unresolved.append(idx)
            else:
                row[idx], pos = dec(buf, pos)
        bit <<= 1
    return row, pos, tuple(unresolved)
