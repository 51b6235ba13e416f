"""TABLE_MAP events: a table's column types, metadata, nullability and optional metadata.

Layout (MySQL ``Table_map_log_event``): post-header table_id (6 bytes; 4 in old formats) and
flags u16; then schema (u8 length, name, NUL), table (same), column count (packed int),
one type byte per column, metadata block (packed length, then per-type bytes), the NULL-able
bitmap, and optional metadata as type/length/value fields (``binlog_row_metadata``, MySQL
8.0.1+ and MariaDB 10.5+).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pipelines.binlog import coltypes as T
from pipelines.binlog.packed_ints import read_packed_int
from pipelines.binlog.framing import EventHeader
from pipelines.errors import DecodeError, TruncatedError

__all__ = ["TableMap", "decode_table_map", "OptionalMeta"]


class OptionalMeta:
    """Optional metadata field types (``Table_map_log_event::Optional_metadata_field_type``)."""

    SIGNEDNESS = 1
    DEFAULT_CHARSET = 2
    COLUMN_CHARSET = 3
    COLUMN_NAME = 4
    SET_STR_VALUE = 5
    ENUM_STR_VALUE = 6
    GEOMETRY_TYPE = 7
    SIMPLE_PRIMARY_KEY = 8
    PRIMARY_KEY_WITH_PREFIX = 9
    ENUM_AND_SET_DEFAULT_CHARSET = 10
    ENUM_AND_SET_COLUMN_CHARSET = 11
    COLUMN_VISIBILITY = 12


class _Codecs:
    """Decoding state built lazily per table content; shared by TableMaps of equal bytes."""

    __slots__ = ("decoders", "images")

    def __init__(self) -> None:
        self.decoders: list[Callable] | None = None
        self.images: dict = {}


@dataclass(slots=True)
class TableMap:
    """What one TABLE_MAP says of a table. Per-column lists are in column order.

    ``column_types`` are resolved types (STRING's real type: CHAR, ENUM or SET) and
    ``column_meta`` the normalised metadata ints described in ``docs/bronze.md``. Optional
    metadata lists are ``None`` when the server did not log them.
    """

    header: EventHeader | None
    table_id: int
    schema: str
    table: str
    column_types: list[int]
    column_meta: list[int]
    nullable: list[bool]
    unsigned: list[bool] | None = None
    charsets: list[int | None] | None = None
    column_names: list[str] | None = None
    primary_key: list[int] | None = None
    enum_values: list[list[str] | None] | None = None
    set_values: list[list[str] | None] | None = None
    geometry_types: list[int | None] | None = None
    visibility: list[bool] | None = None
    _codecs: _Codecs = field(default_factory=_Codecs, repr=False, compare=False)

    @property
    def column_count(self) -> int:
        return len(self.column_types)

    def decoders(self) -> list[Callable]:
        """One value decoder per column (built once per table content, reused for every row)."""
        codecs = self._codecs
        if codecs.decoders is None:
            from pipelines.binlog.values import column_decoder

            uns = self.unsigned or [None] * self.column_count
            codecs.decoders = [
                column_decoder(t, m, u)
                for t, m, u in zip(self.column_types, self.column_meta, uns)
            ]
        return codecs.decoders

    def image_cache(self) -> dict:
        """A dict for the row-image functions ``rows.py`` builds for this table (by columns
        present); shared, like :meth:`decoders`, with every :meth:`rebound` copy."""
        return self._codecs.images

    def rebound(self, header: EventHeader | None, table_id: int) -> TableMap:
        """This table map as sent again by another TABLE_MAP event of the same content.

        Servers re-send a table's TABLE_MAP in every transaction: the copy shares the column
        lists and the built decoders, so they are built once per table, not per event.
        """
        return TableMap(header, table_id, self.schema, self.table, self.column_types,
                        self.column_meta, self.nullable, self.unsigned, self.charsets,
                        self.column_names, self.primary_key, self.enum_values,
                        self.set_values, self.geometry_types, self.visibility, self._codecs)


def _read_meta(types: list[int], buf: bytes, pos: int, end: int) -> tuple[list[int], list[int]]:
    """Decode the per-column metadata block; return (resolved types, normalised meta)."""
    resolved: list[int] = []
    metas: list[int] = []
    for t in types:
        meta = 0
        if t in (T.FLOAT, T.DOUBLE, T.BLOB, T.GEOMETRY, T.JSON, T.VECTOR, T.TINY_BLOB,
                 T.MEDIUM_BLOB, T.LONG_BLOB, T.TIMESTAMP2, T.DATETIME2, T.TIME2):
            meta = buf[pos]
            pos += 1
        elif t in (T.VARCHAR, T.VAR_STRING):
            meta = buf[pos] | buf[pos + 1] << 8
            pos += 2
        elif t == T.NEWDECIMAL:
            meta = buf[pos] << 8 | buf[pos + 1]  # precision, scale
            pos += 2
        elif t == T.BIT:
            meta = buf[pos + 1] * 8 + buf[pos]  # bytes * 8 + remaining bits
            pos += 2
        elif t in (T.STRING, T.ENUM, T.SET):
            b0, b1 = buf[pos], buf[pos + 1]
            pos += 2
            real = b0 if b0 else t
            if real in (T.ENUM, T.SET):
                t, meta = real, b1
            else:
                # CHAR lengths over 255 keep their top bits, inverted, in the type byte
                # (MySQL Field_string::save_field_metadata).
                meta = (((b0 & 0x30) ^ 0x30) << 4) | b1
                t = T.STRING
        resolved.append(t)
        metas.append(meta)
        if pos > end:
            raise TruncatedError("TABLE_MAP metadata block shorter than its columns need")
    return resolved, metas


def _bits(buf: bytes, count: int) -> list[bool]:
    """Unpack a bitmap stored most significant bit first (optional metadata style)."""
    return [bool(buf[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _strings(buf: bytes, pos: int, end: int) -> tuple[list[str], int]:
    n, pos = read_packed_int(buf, pos)
    out = []
    for _ in range(n):
        ln, pos = read_packed_int(buf, pos)
        out.append(bytes(buf[pos:pos + ln]).decode("utf-8", "surrogateescape"))
        pos += ln
    return out, pos


def _apply_optional(tm: TableMap, buf: bytes, pos: int, end: int,
                    year_signedness: bool = False) -> None:
    types = tm.column_types
    n = len(types)
    # MariaDB's server gives YEAR a bit of its own in SIGNEDNESS (its Field_year is an
    # unsigned integer field) while its mariadb-binlog reads the bits without one: every
    # numeric column after a YEAR printed with its neighbour's sign (measured on 10.11:
    # ``b INT UNSIGNED, y YEAR, c INT UNSIGNED, d INT`` printed ``d INT UNSIGNED``).
    signed_kinds = T.NUMERIC_TYPES | {T.YEAR} if year_signedness else T.NUMERIC_TYPES
    numeric = [i for i, t in enumerate(types) if t in signed_kinds]
    character = [i for i, t in enumerate(types) if t in T.CHARACTER_TYPES]
    enumset = [i for i, t in enumerate(types) if t in (T.ENUM, T.SET)]
    while pos < end:
        ftype = buf[pos]
        flen, pos = read_packed_int(buf, pos + 1)
        val = buf[pos:pos + flen]
        if len(val) < flen:
            raise TruncatedError(f"optional metadata field {ftype} runs past the event end")
        vend = flen
        if ftype == OptionalMeta.SIGNEDNESS:
            flags = _bits(val, len(numeric))
            uns: list[bool] = [False] * n
            for col, flag in zip(numeric, flags):
                uns[col] = flag and types[col] != T.YEAR
            tm.unsigned = uns
        elif ftype in (OptionalMeta.DEFAULT_CHARSET, OptionalMeta.ENUM_AND_SET_DEFAULT_CHARSET):
            cols = character if ftype == OptionalMeta.DEFAULT_CHARSET else enumset
            default, p = read_packed_int(val, 0)
            per = {c: default for c in cols}
            while p < vend:
                idx, p = read_packed_int(val, p)
                coll, p = read_packed_int(val, p)
                if idx < len(cols):
                    per[cols[idx]] = coll
            _merge_charsets(tm, per)
        elif ftype in (OptionalMeta.COLUMN_CHARSET, OptionalMeta.ENUM_AND_SET_COLUMN_CHARSET):
            cols = character if ftype == OptionalMeta.COLUMN_CHARSET else enumset
            p, per = 0, {}
            for c in cols:
                if p >= vend:
                    break
                per[c], p = read_packed_int(val, p)
            _merge_charsets(tm, per)
        elif ftype == OptionalMeta.COLUMN_NAME:
            p, names = 0, []
            while p < vend:
                ln, p = read_packed_int(val, p)
                names.append(bytes(val[p:p + ln]).decode("utf-8", "surrogateescape"))
                p += ln
            tm.column_names = names
        elif ftype in (OptionalMeta.SET_STR_VALUE, OptionalMeta.ENUM_STR_VALUE):
            want = T.SET if ftype == OptionalMeta.SET_STR_VALUE else T.ENUM
            cols = [i for i, t in enumerate(types) if t == want]
            p, per_col = 0, [None] * n
            for c in cols:
                if p >= vend:
                    break
                per_col[c], p = _strings(val, p, vend)
            if want == T.SET:
                tm.set_values = per_col
            else:
                tm.enum_values = per_col
        elif ftype == OptionalMeta.GEOMETRY_TYPE:
            cols = [i for i, t in enumerate(types) if t == T.GEOMETRY]
            p, geo = 0, [None] * n
            for c in cols:
                if p >= vend:
                    break
                geo[c], p = read_packed_int(val, p)
            tm.geometry_types = geo
        elif ftype in (OptionalMeta.SIMPLE_PRIMARY_KEY, OptionalMeta.PRIMARY_KEY_WITH_PREFIX):
            p, pk = 0, []
            while p < vend:
                idx, p = read_packed_int(val, p)
                if ftype == OptionalMeta.PRIMARY_KEY_WITH_PREFIX:
                    _, p = read_packed_int(val, p)
                pk.append(idx)
            tm.primary_key = pk
        elif ftype == OptionalMeta.COLUMN_VISIBILITY:
            tm.visibility = _bits(val, n)
        # Unknown optional fields are skipped by their length.
        pos += flen


def _merge_charsets(tm: TableMap, per: dict[int, int]) -> None:
    if tm.charsets is None:
        tm.charsets = [None] * tm.column_count
    for col, coll in per.items():
        tm.charsets[col] = coll


def decode_table_map(header: EventHeader, body: bytes, post_header_len: int,
                     mariadb: bool = False) -> TableMap:
    """Decode a TABLE_MAP body (checksum trailer removed). ``mariadb``: written by a MariaDB
    server (its SIGNEDNESS bits count YEAR columns). Raises :class:`DecodeError`."""
    try:
        id_len = 4 if post_header_len == 6 else 6
        table_id = int.from_bytes(body[:id_len], "little")
        pos = post_header_len or 8
        db_len = body[pos]
        schema = bytes(body[pos + 1:pos + 1 + db_len]).decode("utf-8", "surrogateescape")
        pos += 2 + db_len
        tbl_len = body[pos]
        table = bytes(body[pos + 1:pos + 1 + tbl_len]).decode("utf-8", "surrogateescape")
        pos += 2 + tbl_len
        ncols, pos = read_packed_int(body, pos)
        raw_types = list(body[pos:pos + ncols])
        if len(raw_types) < ncols:
            raise TruncatedError("TABLE_MAP column types run past the event end")
        pos += ncols
        if pos == len(body):
            # MySQL 5.1 development trees (5.1.x/5.2.x "-a_drop", pre-GA rows events) wrote
            # TABLE_MAPs that end after the column types: no metadata, no NULL bitmap.
            return TableMap(header, table_id, schema, table, raw_types, [0] * ncols,
                            [True] * ncols)
        meta_len, pos = read_packed_int(body, pos)
        meta_end = pos + meta_len
        types, metas = _read_meta(raw_types, body, pos, meta_end)
        pos = meta_end
        null_len = (ncols + 7) // 8
        nb = body[pos:pos + null_len]
        nullable = [bool(nb[i >> 3] & (1 << (i & 7))) for i in range(ncols)] if len(nb) == null_len else [True] * ncols
        pos += null_len
        tm = TableMap(header, table_id, schema, table, types, metas, nullable)
        if pos < len(body):
            _apply_optional(tm, body, pos, len(body), year_signedness=mariadb)
        return tm
    except IndexError:
        raise TruncatedError("TABLE_MAP runs past the event end", preview=bytes(body[:32])) from None
    except DecodeError:
        raise
