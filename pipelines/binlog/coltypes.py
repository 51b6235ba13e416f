"""MySQL column type codes as written in TABLE_MAP events (``enum_field_types``).

See MySQL ``include/field_types.h`` / MariaDB ``include/mysql_com.h``. ``STRING`` columns carry
their real type (CHAR, ENUM or SET) in the first metadata byte; the table-map parser resolves
it, so value decoders receive ENUM and SET as types of their own.
"""

from __future__ import annotations

DECIMAL = 0  # pre-5.0 DECIMAL, stored as text
TINY = 1
SHORT = 2
LONG = 3
FLOAT = 4
DOUBLE = 5
NULL = 6
TIMESTAMP = 7
LONGLONG = 8
INT24 = 9
DATE = 10
TIME = 11
DATETIME = 12
YEAR = 13
NEWDATE = 14
VARCHAR = 15
BIT = 16
TIMESTAMP2 = 17
DATETIME2 = 18
TIME2 = 19
TYPED_ARRAY = 20
VECTOR = 242
JSON = 245
NEWDECIMAL = 246
ENUM = 247
SET = 248
TINY_BLOB = 249
MEDIUM_BLOB = 250
LONG_BLOB = 251
BLOB = 252
VAR_STRING = 253
STRING = 254
GEOMETRY = 255

NAMES: dict[int, str] = {
    v: k for k, v in globals().items() if k.isupper() and isinstance(v, int)
}

INTEGER_TYPES = frozenset({TINY, SHORT, INT24, LONG, LONGLONG})
INTEGER_WIDTH = {TINY: 1, SHORT: 2, INT24: 3, LONG: 4, LONGLONG: 8}
# Strings with a 1- or 2-byte length (the metadata's maximum length), and blob-like columns
# with a 1..4-byte length (the metadata's length size).
VARCHAR_LIKE = frozenset({VARCHAR, VAR_STRING, STRING})
BLOB_LIKE = frozenset({TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, GEOMETRY, VECTOR})
# Types whose bronze value is the column's raw bytes (charset applied in silver).
BYTES_TYPES = VARCHAR_LIKE | BLOB_LIKE
# Types silver writes as their ASCII text in double quotes (exact numbers, dates and times).
QUOTED_TYPES = frozenset({NEWDECIMAL, DECIMAL, DATE, NEWDATE, TIME, TIME2, DATETIME, DATETIME2,
                          TIMESTAMP, TIMESTAMP2})
# Types whose TABLE_MAP optional metadata counts them as "character" columns
# (binlog_row_metadata COLUMN_CHARSET / DEFAULT_CHARSET lists).
CHARACTER_TYPES = frozenset({VARCHAR, VAR_STRING, STRING, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB})
NUMERIC_TYPES = frozenset(
    {TINY, SHORT, INT24, LONG, LONGLONG, FLOAT, DOUBLE, NEWDECIMAL, DECIMAL}
)


def name(code: int) -> str:
    """The type's name (``"LONGLONG"``), or ``"TYPE_<n>"`` for a code MySQL does not define."""
    return NAMES.get(code, f"TYPE_{code}")
