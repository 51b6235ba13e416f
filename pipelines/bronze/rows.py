"""WRITE/UPDATE/DELETE rows events (v0 pre-GA, v1, v2): row images in binlog order.

Layout (MySQL ``Rows_log_event``): post-header table_id (6 bytes; 4 in old formats), flags u16
and, for v2, an extra-data block (u16 length that counts itself). Body: column count (packed
int), the columns-present bitmap (for UPDATE a second one for the after image), then rows: per
image a NULL bitmap over the *present* columns followed by the present non-NULL values.
"""

from __future__ import annotations

import struct

from pipelines.bronze.events import EventType as E
from pipelines.bronze.events import RowsEvent, read_packed_int
from pipelines.bronze.framing import EventHeader
from pipelines.bronze.table_map import TableMap
from pipelines.errors import DecodeError, MissingTableMapError, TruncatedError

__all__ = ["ROWS_KINDS", "decode_rows", "STMT_END_F"]

ROWS_KINDS: dict[int, str] = {
    E.PRE_GA_WRITE_ROWS: "INSERT", E.PRE_GA_UPDATE_ROWS: "UPDATE", E.PRE_GA_DELETE_ROWS: "DELETE",
    E.WRITE_ROWS_V1: "INSERT", E.UPDATE_ROWS_V1: "UPDATE", E.DELETE_ROWS_V1: "DELETE",
    E.WRITE_ROWS: "INSERT", E.UPDATE_ROWS: "UPDATE", E.DELETE_ROWS: "DELETE",
}
_V2 = frozenset({E.WRITE_ROWS, E.UPDATE_ROWS, E.DELETE_ROWS, E.PARTIAL_UPDATE_ROWS})
STMT_END_F = 0x0001
_DUMMY_TABLE_IDS = frozenset({0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFF})


def _present(buf: bytes, pos: int, ncols: int) -> tuple[list[bool] | None, int]:
    nbytes = (ncols + 7) >> 3
    full = (1 << ncols) - 1
    bits = int.from_bytes(buf[pos:pos + nbytes], "little") & full  # unused bits may be set
    if bits == full:
        return None, pos + nbytes
    return [bool(bits >> i & 1) for i in range(ncols)], pos + nbytes


def _columns(tm: TableMap, present: list[bool] | None) -> list[tuple[int, object]]:
    decs = tm.decoders()
    if present is None:
        return list(enumerate(decs))
    return [(i, d) for i, d in enumerate(decs) if present[i]]


def _image(buf: bytes, pos: int, cols: list, ncols: int, nbytes: int) -> tuple[list, int]:
    """Decode one row image starting at its NULL bitmap; return (values, new_pos)."""
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
    header: EventHeader, body: bytes, post_header_len: int, table_maps: dict[int, TableMap]
) -> RowsEvent | None:
    """Decode a rows event body (checksum trailer removed) with the table map it names.

    Returns ``None`` for MySQL's dummy rows event (no table, no rows). Raises
    :class:`MissingTableMapError` when the table_id has no TABLE_MAP, :class:`TruncatedError`
    when a value runs past the event end, :class:`DecodeError` when the column count differs
    from the TABLE_MAP's.
    """
    type_code = header.type_code
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
    kind = ROWS_KINDS.get(type_code) or ("UPDATE" if type_code == E.PARTIAL_UPDATE_ROWS else "?")
    ncols, pos = read_packed_int(body, pos)
    if ncols != tm.column_count:
        raise DecodeError(
            f"rows event has {ncols} columns but TABLE_MAP of {tm.schema}.{tm.table} has "
            f"{tm.column_count}", preview=body[:32])
    present_a, pos = _present(body, pos, ncols)
    present_b = present_a
    if kind == "UPDATE":
        present_b, pos = _present(body, pos, ncols)
    cols_a = _columns(tm, present_a)
    nbytes_a = (len(cols_a) + 7) >> 3
    cols_b, nbytes_b = cols_a, nbytes_a
    if present_b is not present_a:
        cols_b = _columns(tm, present_b)
        nbytes_b = (len(cols_b) + 7) >> 3
    end = len(body)
    rows: list = []
    append = rows.append
    try:
        if kind == "INSERT":
            while pos < end:
                after, pos = _image(body, pos, cols_a, ncols, nbytes_a)
                append((None, after))
        elif kind == "DELETE":
            while pos < end:
                before, pos = _image(body, pos, cols_a, ncols, nbytes_a)
                append((before, None))
        else:
            while pos < end:
                before, pos = _image(body, pos, cols_a, ncols, nbytes_a)
                after, pos = _image(body, pos, cols_b, ncols, nbytes_b)
                append((before, after))
    except (IndexError, struct.error) as exc:
        raise TruncatedError(f"row {len(rows)} of {tm.schema}.{tm.table} runs past the event end",
                             preview=body[pos:pos + 32]) from exc
    except DecodeError as exc:
        exc.reason = f"row {len(rows)} of {tm.schema}.{tm.table}: {exc.reason}"
        raise
    if pos != end:
        raise TruncatedError(f"last row of {tm.schema}.{tm.table} runs past the event end")
    if kind == "INSERT":
        return RowsEvent(header, kind, table_id, flags, tm, rows, None, present_a)
    if kind == "DELETE":
        return RowsEvent(header, kind, table_id, flags, tm, rows, present_a, None)
    return RowsEvent(header, kind, table_id, flags, tm, rows, present_a, present_b)
