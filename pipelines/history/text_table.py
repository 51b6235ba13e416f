"""How the CLI prints result rows (``binlake sql``, the SQL shell, ``binlake query``): a
boxed ASCII table, csv or jsonl, one copy of each.

A table cell is one line (newlines and tabs shown as ``\\n``, ``\\t``) of at most its width:
a longer value is cut and ends in ``…``, so a cut value is never taken for the whole one. A
table that leaves rows out says how many under it (:func:`rows_line`). csv and jsonl always
carry whole values: csv with NULL as an empty field, jsonl one JSON object per row.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from decimal import Decimal
from typing import Any, Callable, Iterable, Sequence, TextIO

__all__ = ["FORMATS", "CUT", "CELL_WIDTH", "fit", "ascii_table", "rows_line", "plain_text",
           "json_text", "write_rows"]

FORMATS = ("table", "csv", "jsonl")
CUT = "…"  # the last character of a cut cell
CELL_WIDTH = 80  # `binlake sql`'s widest table cell, one-shot and in the shell

Text = Callable[[str, Any], str]  # (column, a value that is not None) → its text


def fit(text: str, width: int | None) -> str:
    """``text`` as one table line of at most ``width`` characters (None: any), ``…`` last when
    it was cut."""
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return text if width is None or len(text) <= width else text[:max(width - 1, 0)] + CUT


def ascii_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``columns`` and already-formatted ``rows`` as a boxed table (no trailing newline)."""
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(vals: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"

    return "\n".join([sep, line(columns), sep, *map(line, rows), sep])


def rows_line(shown: int, left_out: int | None = 0) -> str:
    """The line under a table: ``(3 rows)``, ``(50 rows shown, 1184 left out: raise
    --limit)``; ``left_out`` None: more rows, not counted."""
    text = f"({shown} row{'s' if shown != 1 else ''}"
    if left_out is None:
        return text + ", more not shown: raise --limit)"
    if left_out:
        return text + f" shown, {left_out} left out: raise --limit)"
    return text + ")"


def plain_text(column: str, value: Any) -> str:
    """A value's text: bytes as ``0x`` and hex digits, a struct, array or map as its JSON text
    (:func:`json_text`), anything else as ``str`` gives it."""
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if hasattr(value, "asDict") or isinstance(value, (list, tuple, dict)):
        return json_text(column, value)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat(" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "asDict"):  # a struct (pyspark Row)
        return {k: _jsonable(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def json_text(_column: str, value: Any) -> str:
    """A value as JSON text: a decimal as the number it is (all its digits; inside a struct or
    an array, as a string), a timestamp as ``YYYY-MM-DD HH:MM:SS[.ffffff]``, bytes as in
    :func:`plain_text`."""
    if isinstance(value, Decimal) and value.is_finite():
        return str(value)
    return json.dumps(_jsonable(value), ensure_ascii=False)


def write_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, out: TextIO, *,
               text: Text = plain_text, as_json: Text = json_text,
               width: int | None = None) -> int:
    """Print ``rows`` (values in ``columns`` order) in ``fmt`` (:data:`FORMATS`); return how
    many. ``text`` gives a value's text (table, csv), ``as_json`` its JSON text (jsonl, also
    given None), ``width`` the table's widest cell. The table's caller prints
    :func:`rows_line` when it wants one."""
    n = 0
    if fmt == "jsonl":
        keys = [json.dumps(c, ensure_ascii=False) for c in columns]
        for r in rows:
            out.write("{" + ", ".join(f"{k}: {as_json(c, v)}"
                                      for k, c, v in zip(keys, columns, r)) + "}\n")
            n += 1
        return n
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if v is None else text(c, v) for c, v in zip(columns, r)])
            n += 1
        return n
    if fmt != "table":
        raise ValueError(f"unknown output format {fmt!r}")
    cells = [["NULL" if v is None else fit(text(c, v), width) for c, v in zip(columns, r)]
             for r in rows]
    out.write(ascii_table(columns, cells) + "\n")
    return len(cells)
