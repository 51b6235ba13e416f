"""Pure: a schema-snapshot column → its Spark type in the mirror, and silver JSON value → the
Python value of that type (``docs/mirror.md`` has the table).

Silver's value forms (``docs/types.md``) are exact text or exact JSON numbers, so every
conversion here is exact; a value the target type cannot hold raises
:class:`~pipelines.errors.SchemaMismatchError` (the mirror never casts lossily). The one
documented exception: MySQL's zero and partial dates (``0000-00-00``, ``2024-00-10``) have
no Spark DATE/TIMESTAMP value and become NULL.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from pipelines.errors import SchemaMismatchError
from pipelines.lake.sql_types import decimal_parts

__all__ = ["MirrorType", "STRING", "JSON_IN_TEXT", "type_of_column", "converter", "widen", "json_text",
           "parse_image"]

_INT_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_INT_ORDER = ["tinyint", "smallint", "int", "bigint"]
_SIGNED = {"tinyint": "tinyint", "smallint": "smallint", "mediumint": "int", "int": "int",
           "integer": "int", "bigint": "bigint"}
_UNSIGNED = {"tinyint": "smallint", "smallint": "int", "mediumint": "int", "int": "bigint",
             "integer": "bigint", "bigint": "decimal(20,0)"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry",
          "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
          "geometrycollection", "vector"}
_MAX_PRECISION = 38


@dataclass(frozen=True)
class MirrorType:
    """A mirror column's Spark type (``spark``, a DDL type string) and how silver's JSON value
    becomes a value of it (``kind``: int, decimal, float, double, date, datetime, timestamp,
    text, json, binary)."""

    spark: str
    kind: str


STRING = MirrorType("string", "text")
# A MariaDB JSON column's value rendered as text (no snapshot named it JSON): the document
# inside the JSON string, as the mirror's json columns hold it (json_text of the parsed text)
JSON_IN_TEXT = MirrorType("string", "json_in_text")


def _decimal_type(p: int, s: int) -> MirrorType:
    if p > _MAX_PRECISION:
        return STRING  # DECIMAL(65,30) does not fit Spark's 38 digits: its exact text
    return MirrorType(f"decimal({p},{s})", "decimal")


def type_of_column(data_type: str, column_type: str, *, is_json: bool = False) -> MirrorType:
    """The mirror type of a column as ``information_schema.COLUMNS`` describes it."""
    t = (data_type or "").lower()
    full = (column_type or "").lower()
    unsigned = "unsigned" in full.split()
    if is_json or t == "json":
        return MirrorType("string", "json")
    if t in _SIGNED:
        spark = (_UNSIGNED if unsigned else _SIGNED)[t]
        return MirrorType(spark, "decimal" if spark.startswith("decimal") else "int")
    if t == "bit":
        m = re.search(r"\((\d+)\)", full)
        return MirrorType("bigint", "int") if m and int(m.group(1)) < 64 else MirrorType(
            "decimal(20,0)", "decimal")
    if t == "year":
        return MirrorType("int", "int")
    if t in ("decimal", "numeric"):
        m = re.search(r"\((\d+)(?:,(\d+))?\)", full)
        p, s = (int(m.group(1)), int(m.group(2) or 0)) if m else (10, 0)
        return _decimal_type(p, s)
    if t == "float":
        return MirrorType("float", "float")
    if t in ("double", "real"):
        return MirrorType("double", "double")
    if t == "date":
        return MirrorType("date", "date")
    if t == "datetime":
        return MirrorType("timestamp_ntz", "datetime")
    if t == "timestamp":
        return MirrorType("timestamp", "timestamp")
    if t in _BYTES:
        return MirrorType("binary", "binary")
    return STRING  # char/varchar/text types, enum, set, time, unknown types: text


# -- widening --------------------------------------------------------------------------------

def _digits(spark: str) -> tuple[int, int] | None:
    """(integer digits, scale) of an exact numeric type."""
    if spark in _INT_DIGITS:
        return _INT_DIGITS[spark], 0
    parts = decimal_parts(spark)
    return (parts[0] - parts[1], parts[1]) if parts else None


def widen(a: MirrorType, b: MirrorType) -> MirrorType:
    """The narrowest mirror type holding every value of ``a`` and of ``b`` exactly.

    Integers widen to the larger integer, exact numbers to a DECIMAL with enough integer and
    fraction digits, FLOAT to DOUBLE, DATE to TIMESTAMP_NTZ (DATETIME). Anything else (or a
    DECIMAL past 38 digits) falls back to string: every old value becomes its exact text
    (bytes as base64), never a lossy number.
    """
    if a == b:
        return a
    if a.kind == "json" or b.kind == "json":
        return MirrorType("string", "json") if a.spark == b.spark == "string" else STRING
    if a.spark == b.spark:
        return a if a.kind != "text" else STRING
    if a.spark in _INT_DIGITS and b.spark in _INT_DIGITS:
        return MirrorType(max(a.spark, b.spark, key=_INT_ORDER.index), "int")
    da, db = _digits(a.spark), _digits(b.spark)
    if da and db:
        whole, scale = max(da[0], db[0]), max(da[1], db[1])
        return _decimal_type(whole + scale, scale)
    pair = {a.spark, b.spark}
    if pair == {"float", "double"}:
        return MirrorType("double", "double")
    if pair <= {"float", "double", "tinyint", "smallint", "int"}:
        return MirrorType("double", "double")  # int32 is exact in a double
    if pair == {"date", "timestamp_ntz"}:
        return MirrorType("timestamp_ntz", "datetime")
    return STRING


# -- values ----------------------------------------------------------------------------------

_DECODER = json.JSONDecoder(parse_float=Decimal)
_ENCODER = json.JSONEncoder(ensure_ascii=False)  # made once: json.dumps makes one per call


def parse_image(text: str | None) -> dict[str, Any] | None:
    """Silver's JSON image with exact numbers (``Decimal`` for fractions)."""
    if text is None:
        return None
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        end = -1
    # anything else (leading or trailing text): decode, as before, and its error
    return value if end == len(text) else _DECODER.decode(text)


def json_text(value: Any) -> str:
    """JSON text of a value :func:`parse_image` produced (numbers kept exact)."""
    try:
        return _ENCODER.encode(value)  # the C encoder: no Decimal inside
    except TypeError:
        return _json_text(value)


def _json_text(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + _json_text(v)
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _document(value: Any) -> str:
    """A JSON document given as its text (``JSON_IN_TEXT``), as :func:`json_text` gives it;
    text that is no JSON (written before the CHECK) stays as it is."""
    if not isinstance(value, str):
        return json_text(value)
    try:
        return json_text(_DECODER.decode(value))
    except ValueError:
        return value


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        if text[:4].isdigit() and ("-00" in text[4:10] or text.startswith("0000")):
            return None  # zero / partial date: no Spark value (module docstring)
        raise


def _datetime(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        if _date(text[:10]) is None:
            return None
        raise


def _timestamp(text: str) -> dt.datetime | None:
    value = _datetime(text)
    return None if value is None else value.replace(tzinfo=dt.timezone.utc)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def _decimal(value: Any) -> Decimal:
    return Decimal(value) if isinstance(value, (str, int)) else Decimal(str(value))


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "int": int,
    "decimal": _decimal,
    "float": float,
    "double": float,
    "date": lambda v: _date(v),
    "datetime": lambda v: _datetime(v),
    "timestamp": lambda v: _timestamp(v),
    "text": _as_text,
    "json": json_text,
    "json_in_text": lambda v: _document(v),
    "binary": lambda v: base64.b64decode(v, validate=True),
}


def _to_text(value: Any, source: MirrorType) -> str:
    """A converted value as the exact text the string fallback of :func:`widen` stores."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if isinstance(value, (dt.date, Decimal, int, float)):
        return str(value)
    return value


def converter(source: MirrorType, target: MirrorType, column: str) -> Callable[[Any], Any]:
    """A function: silver JSON value of a ``source``-typed column → a value of ``target``
    (``target`` is ``source`` or a :func:`widen` of it). Raises :class:`SchemaMismatchError`
    naming ``column`` when a value does not fit (bad silver data, never a silent cast)."""
    base = _CONVERT[source.kind]
    if target.kind in ("text", "json") and source.kind not in ("text", "json",
                                                                 "json_in_text"):
        def convert(value: Any) -> Any:
            out = base(value)
            return None if out is None else _to_text(out, source)
    elif target.kind == "datetime" and source.kind == "date":
        def convert(value: Any) -> Any:
            out = base(value)
            return None if out is None else dt.datetime.combine(out, dt.time())
    elif target.kind == "decimal" and source.kind == "int":
        def convert(value: Any) -> Any:
            return Decimal(int(value))
    elif target.kind == "double" and source.kind == "int":
        def convert(value: Any) -> Any:
            return float(int(value))
    else:
        convert = base

    def checked(value: Any) -> Any:
        if value is None:
            return None
        try:
            return convert(value)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise SchemaMismatchError(f"column {column}: value {str(value)[:40]!r} is not a "
                                      f"{source.spark}") from exc

    return checked
