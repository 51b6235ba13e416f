"""Column lists as ``(name, Spark SQL type)`` pairs, and what is derived from them: Spark DDL
text and Arrow schemas. Pure; no Spark.

Types understood: ``string``, ``binary``, ``boolean``, ``tinyint``, ``smallint``, ``int``,
``bigint``, ``float``, ``double``, ``date``, ``timestamp`` (Arrow: microseconds, UTC),
``timestamp_ntz`` (microseconds, no zone), ``decimal(p,s)`` and ``array<T>``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from pipelines.vocabulary import quote_ident

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Column", "parse_columns", "ddl", "arrow_type", "arrow_schema", "decimal_parts"]

Column = tuple[str, str]

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def decimal_parts(kind: str) -> tuple[int, int] | None:
    """``decimal(p,s)`` (a Spark type, lower case) → (precision, scale); ``None`` otherwise."""
    m = _DECIMAL.match(kind)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _split_top(text: str) -> list[str]:
    """Split on commas outside ``<>``/``()``."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


def parse_columns(text: str) -> tuple[Column, ...]:
    """``"a string, b array<int>"`` → ``(("a", "string"), ("b", "array<int>"))``."""
    cols = []
    for part in _split_top(text):
        name, _, kind = part.partition(" ")
        if not kind.strip():
            raise ValueError(f"column {part!r}: expected 'name type'")
        arrow_type(kind.strip())  # rejects what cannot be derived
        cols.append((name.strip("`"), kind.strip()))
    return tuple(cols)


def ddl(columns: Sequence[Column], *, quoted: bool = False) -> str:
    """Spark DDL text for ``columns`` (names in backquotes when ``quoted``, for SQL)."""
    if quoted:
        return ", ".join(f"{quote_ident(n)} {k}" for n, k in columns)
    return ", ".join(f"{n} {k}" for n, k in columns)


def arrow_type(kind: str) -> "pa.DataType":
    """The Arrow type of a Spark SQL type name; :class:`ValueError` for one not listed above."""
    import pyarrow as pa

    k = kind.strip().lower()
    simple = {
        "string": pa.string(), "binary": pa.binary(), "boolean": pa.bool_(),
        "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
        "float": pa.float32(), "double": pa.float64(), "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    }
    if k in simple:
        return simple[k]
    if k.startswith("array<") and k.endswith(">"):
        return pa.list_(arrow_type(k[len("array<"):-1]))
    parts = decimal_parts(k)
    if parts:
        return pa.decimal128(*parts)
    raise ValueError(f"no Arrow type for Spark type {kind!r}")


def arrow_schema(columns: Sequence[Column]) -> "pa.Schema":
    """An Arrow schema with ``columns`` in order."""
    import pyarrow as pa

    return pa.schema([(n, arrow_type(k)) for n, k in columns])
