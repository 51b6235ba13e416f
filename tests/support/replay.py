"""Replay: fold silver's row images per table in binlog order and compare with the server.

The expected side comes from the server itself: one SELECT per table in which the server
renders every column as text (``CAST(… AS CHAR)``, ``HEX()`` for bytes, ``+0`` for BIT and
YEAR), with ``time_zone = '+00:00'``. Both sides are turned into comparable Python values by
the column's declared type from ``information_schema``; silver's JSON is parsed with exact
numbers (``Decimal``). A column added by DDL after a row's last change holds NULL in the
replay (the workload adds columns without defaults).
"""

from __future__ import annotations

import base64
import json
import struct
from collections import Counter
from decimal import Decimal
from typing import Any, Iterable

__all__ = ["server_tables", "replay_silver", "table_columns"]

_INT = {"tinyint", "smallint", "mediumint", "int", "bigint", "bit", "year"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry",
          "point", "linestring", "polygon"}
_TEMPORAL = {"date", "time", "datetime", "timestamp"}


def _q(ident: str) -> str:
    return "`" + ident.replace("`", "``") + "`"


def table_columns(conn, schema: str, table: str) -> list[dict[str, Any]]:
    """Columns in ordinal order: name, data_type, is_json, pk position (from the server)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.ORDINAL_POSITION, k.ORDINAL_POSITION, "
            "EXISTS (SELECT 1 FROM information_schema.CHECK_CONSTRAINTS cc "
            "        WHERE cc.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA AND cc.TABLE_NAME = c.TABLE_NAME"
            "        AND cc.CHECK_CLAUSE LIKE CONCAT('%%json_valid(`', c.COLUMN_NAME, '`)%%')) "
            "FROM information_schema.COLUMNS c LEFT JOIN information_schema.KEY_COLUMN_USAGE k "
            "ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME "
            "AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY' "
            "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION",
            (schema, table))
        return [{"name": r[0], "type": r[1].lower(), "pk": r[3],
                 "json": bool(r[4]) or r[1].lower() == "json"} for r in cur.fetchall()]


def _select_expr(col: dict[str, Any]) -> str:
    name, t = _q(col["name"]), col["type"]
    if t in _BYTES:
        return f"HEX({name})"
    if t in ("bit", "year"):
        return f"{name} + 0"
    if t == "float":
        # CAST(float AS CHAR) prints 6 significant digits; as DOUBLE the value is exact.
        return f"CAST({name} AS DOUBLE)"
    return f"CAST({name} AS CHAR)"


def _canon(col: dict[str, Any], value: Any, *, from_silver: bool) -> Any:
    """A comparable form of one value of ``col``, from the server's text or silver's JSON."""
    if value is None:
        return None
    t = col["type"]
    if col["json"]:
        return json.loads(value, parse_float=Decimal) if not from_silver else value
    if t in _INT:
        return int(value)
    if t == "float":
        return struct.pack("<f", float(value))
    if t == "double":
        return float(value)
    if t in _BYTES:
        return base64.b64decode(value) if from_silver else bytes.fromhex(value)
    if t == "decimal":
        return str(value)
    return str(value)


def _frozen(v: Any) -> Any:
    """A hashable form of a JSON value that keeps its types (a Decimal stays a Decimal)."""
    if isinstance(v, dict):
        return ("json-object", tuple(sorted((k, _frozen(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("json-array", tuple(_frozen(x) for x in v))
    return v


def _thawed(v: Any) -> Any:
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "json-object":
        return {k: _thawed(x) for k, x in v[1]}
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "json-array":
        return [_thawed(x) for x in v[1]]
    return v


def _frozen_row(row: tuple) -> tuple:
    return tuple(_frozen(v) for v in row)


def _thawed_row(row: tuple) -> tuple:
    return tuple(_thawed(v) for v in row)


def server_tables(conn, tables: Iterable[str]) -> dict[str, list[tuple]]:
    """Every table's rows as comparable tuples (sorted), read from the server."""
    out = {}
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
    for name in tables:
        schema, table = name.split(".")
        cols = table_columns(conn, schema, table)
        exprs = ", ".join(_select_expr(c) for c in cols)
        with conn.cursor() as cur:
            cur.execute(f"SELECT {exprs} FROM {_q(schema)}.{_q(table)}")
            rows = cur.fetchall()
        out[name] = sorted((tuple(_canon(c, v, from_silver=False) for c, v in zip(cols, r))
                            for r in rows), key=repr)
    return out


def replay_silver(rows: Iterable[dict[str, Any]], conn, tables: Iterable[str]
                  ) -> dict[str, list[tuple]]:
    """Fold silver rows (dicts with schema_name, table_name, event_type, seq, row_before,
    row_after) per table in seq order; return each table's final rows like
    :func:`server_tables`. Tables without a PRIMARY KEY fold as multisets of whole rows."""
    wanted = list(tables)
    cols = {t: table_columns(conn, *t.split(".")) for t in wanted}
    state: dict[str, Any] = {}
    for t in wanted:
        state[t] = {} if any(c["pk"] for c in cols[t]) else Counter()
    for r in sorted(rows, key=lambda r: (r["seq"], r.get("row_in_event") or 0)):
        t = f"{r['schema_name']}.{r['table_name']}"
        if t not in state:
            continue
        before = json.loads(r["row_before"], parse_float=Decimal) if r["row_before"] else None
        after = json.loads(r["row_after"], parse_float=Decimal) if r["row_after"] else None
        st = state[t]
        if isinstance(st, Counter):
            if before is not None:
                key = _frozen_row(_row(cols[t], before))
                st[key] -= 1
                if st[key] == 0:
                    del st[key]
            if after is not None:
                st[_frozen_row(_row(cols[t], after))] += 1
            continue
        if before is not None:
            st.pop(_pk(cols[t], before), None)
        if after is not None:
            st[_pk(cols[t], after)] = after
    out = {}
    for t in wanted:
        st = state[t]
        if isinstance(st, Counter):
            rows_out = [_thawed_row(k) for k, n in st.items() for _ in range(n)]
        else:
            rows_out = [_row(cols[t], img) for img in st.values()]
        out[t] = sorted(rows_out, key=repr)
    return out


def _pk(cols: list[dict[str, Any]], image: dict[str, Any]) -> tuple:
    return tuple(json.dumps(image.get(c["name"]), default=str)
                 for c in sorted((c for c in cols if c["pk"]), key=lambda c: c["pk"]))


def _row(cols: list[dict[str, Any]], image: dict[str, Any]) -> tuple:
    return tuple(_canon(c, image.get(c["name"]), from_silver=True) for c in cols)
