"""Pure: each value of silver's JSON images (read value by value,
``pipelines.silver.image_values``) as a SQL literal.

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
from pipelines.silver.render import ColumnSpec

__all__ = ["sql_literal", "quote_text", "SCRIPT_PREAMBLE", "text_json_columns",
           "JsonReadings", "reread"]

SCRIPT_PREAMBLE = ("SET NAMES utf8mb4;\nSET SESSION time_zone = '+00:00';\n"
                   "SET SESSION sql_mode = '';\n")


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
