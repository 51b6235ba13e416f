"""Pure: silver's JSON images read value by value, and each value as a SQL literal.

Silver embeds JSON column values as the text the server stored (MariaDB keeps JSON as text),
so :func:`raw_values` slices each value's text out of the image instead of re-serialising it.
:func:`sql_literal` turns one such value into the literal the server reads back exactly,
given the column's :class:`~pipelines.silver.render.ColumnSpec` (the same one silver rendered
it with): DECIMAL and temporals as quoted text, byte strings as ``X'…'`` (BINARY keeps its
trailing zero bytes), BIT as its integer, ENUM/SET by label, MySQL JSON via ``CAST(… AS
JSON)``, text quoted with backslash escapes (the script sets ``NAMES utf8mb4`` and an empty
``sql_mode``, so latin1 columns convert exactly and backslashes are escapes).
"""

from __future__ import annotations

import base64
import json

from pipelines.binlog import coltypes as T
from pipelines.silver.render import ColumnSpec, pk_text

__all__ = ["raw_values", "sql_literal", "quote_text", "pk_values_of",
           "SCRIPT_PREAMBLE", "text_json_columns", "JsonReadings", "reread"]

_decoder = json.JSONDecoder()
_WS = " \t\r\n"
SCRIPT_PREAMBLE = ("SET NAMES utf8mb4;\nSET SESSION time_zone = '+00:00';\n"
                   "SET SESSION sql_mode = '';\n")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def raw_values(image: str | None) -> dict[str, str] | None:
    """``{"a": 1, "b": {"x": 1.50}}`` → ``{"a": "1", "b": '{"x": 1.50}'}`` (value texts as
    written); ``None`` for a NULL image. Raises ValueError for text that is not a JSON object."""
    if image is None:
        return None
    i = _skip(image, 0)
    if image[i:i + 1] != "{":
        raise ValueError("row image is not a JSON object")
    out: dict[str, str] = {}
    i = _skip(image, i + 1)
    if image[i:i + 1] == "}":
        return out
    while True:
        key, i = _decoder.raw_decode(image, i)
        i = _skip(image, i)
        if image[i:i + 1] != ":":
            raise ValueError("row image: ':' expected")
        start = _skip(image, i + 1)
        _, end = _decoder.raw_decode(image, start)
        out[key] = image[start:end]
        i = _skip(image, end)
        if image[i:i + 1] == ",":
            i = _skip(image, i + 1)
            continue
        if image[i:i + 1] == "}":
            return out
        raise ValueError("row image: ',' or '}' expected")


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}


def quote_text(text: str) -> str:
    """A MySQL string literal with backslash escapes."""
    return "'" + "".join(_ESCAPES.get(ch, ch) for ch in text) + "'"


def _is_bytes(spec: ColumnSpec) -> bool:
    return spec.col_type in (T.GEOMETRY, T.VECTOR) or (
        spec.col_type in T.BYTES_TYPES and spec.charset == "binary")


def sql_literal(spec: ColumnSpec, raw: str | None, *, compare: bool = False) -> str:
    """One silver JSON value (raw text) of ``spec``'s column as a SQL literal.

    ``compare=True`` gives the form for a ``<=>`` comparison (FLOAT columns compare as FLOAT).
    """
    if raw is None or raw == "null":
        return "NULL"
    t = spec.col_type
    if t == T.JSON:
        return f"CAST({quote_text(raw)} AS JSON)"
    if spec.is_json:  # MariaDB JSON: LONGTEXT holding exactly this text
        return quote_text(raw)
    if _is_bytes(spec):
        data = base64.b64decode(json.loads(raw))
        return "X'" + data.hex().upper() + "'" if data else "''"
    if t == T.FLOAT:
        return f"CAST({raw} AS FLOAT)" if compare else raw
    if raw.startswith('"'):
        return quote_text(json.loads(raw))
    return raw  # integers, BIT, YEAR, DOUBLE: exact number text


def pk_values_of(values: dict[str, str], pk_names: list[str]) -> str:
    """silver's ``pk_values`` for an image's raw values (``pk_names`` in table order)."""
    return "|".join(pk_text(values.get(n, "null")) for n in pk_names)


# -- one reading of a MariaDB JSON column -----------------------------------------------------
# MariaDB's JSON is a LONGTEXT with a json_valid CHECK, which only a schema snapshot names:
# silver renders such a value as the document's own text where its snapshot says JSON, and as
# a JSON string of that text elsewhere (``schema_version`` 'binlog', or a snapshot taken before
# the CHECK). The readers turn every value into the reading of the spec they write with.


def text_json_columns(columns) -> frozenset[str]:
    """The MariaDB JSON columns (``is_json`` on a text type, not MySQL's JSON type, which the
    binlog names itself) among ``columns`` (``ColumnSpec`` or snapshot ``ColumnSchema``)."""
    out = set()
    for c in columns:
        if not getattr(c, "is_json", False):
            continue
        if getattr(c, "col_type", None) == T.JSON or (getattr(c, "data_type", "") or "") == "json":
            continue
        out.add(c.name)
    return frozenset(out)


class JsonReadings:
    """Which columns each ``schema_version`` rendered as JSON documents, per table:
    ``binlog`` none, a snapshot those it names JSON on a text type."""

    def __init__(self, snapshots) -> None:
        self._by_id = {s.snapshot_id: s for s in snapshots}

    @classmethod
    def of_plan(cls, plan) -> "JsonReadings":
        """From a ``NamingPlan``'s snapshots."""
        return cls([snap for per in plan.snapshots.values() for _, snap in per])

    def rendered(self, schema_version: str | None, schema: str, table: str) -> frozenset[str]:
        snap = self._by_id.get(schema_version or "")
        if snap is None or (schema, table) not in snap.tables:
            return frozenset()
        return text_json_columns(snap.table(schema, table).columns)


def reread(values: dict[str, str] | None, was: frozenset[str], want: frozenset[str]
           ) -> dict[str, str] | None:
    """``values`` (raw texts) rendered with the MariaDB JSON columns ``was``, read as a spec
    with the JSON columns ``want`` renders them: a JSON string becomes the document it holds
    (a column named JSON since), a document becomes a JSON string of its text (one JSON no
    longer). Other values are left as they are."""
    if values is None or was == want:
        return values
    out = dict(values)
    for name in want - was:
        raw = out.get(name)
        if raw is not None and raw.startswith('"'):
            out[name] = json.loads(raw)
    for name in was - want:
        raw = out.get(name)
        if raw is not None and raw != "null":
            out[name] = json.dumps(raw, ensure_ascii=False)
    return out
