"""binlake's shared words: facts every layer names, each written once.

At the bottom of the package graph: it imports nothing of ``pipelines``, so any module may
use it. What is declared where it is owned stays there and is only pointed to:

* silver's ``seq`` scale (``file_number << 32 | pos``): :data:`pipelines.binlog.names.SEQ_SHIFT`
  and :func:`pipelines.binlog.names.position_key`;
* the lake tables, their columns and paths: :mod:`pipelines.lake.tables`;
* exit codes: :mod:`pipelines.errors` (``EXIT_CONFIG``, ``EXIT_BUSY``);
* binlog column type groups: :mod:`pipelines.binlog.coltypes`.
"""

from __future__ import annotations

import re

__all__ = ["ROW_KEY", "INSERT", "UPDATE", "DELETE", "CHANGE_TYPES", "CHANGE_TYPES_SQL",
           "quote_ident", "delta_ident", "hours_of"]

# A bronze/silver row's identity: the event's place in the binlogs, then the row in it.
ROW_KEY = ("source_id", "binlog_file", "start_pos", "row_in_event")

# Bronze's event types of a row change (silver's, gold's and the mirror's change types).
INSERT, UPDATE, DELETE = "INSERT", "UPDATE", "DELETE"
CHANGE_TYPES = (INSERT, UPDATE, DELETE)
CHANGE_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in CHANGE_TYPES) + ")"  # for SQL text


def quote_ident(name: str) -> str:
    """An identifier in backquotes, backquotes inside doubled (MySQL and Spark SQL alike)."""
    return "`" + name.replace("`", "``") + "`"


def delta_ident(path: str) -> str:
    """Spark SQL's name of the Delta table at ``path``: ``delta.`<path>```."""
    return "delta." + quote_ident(path)


_HOURS = re.compile(r"^\s*(\d+)\s*([dh])\s*$")


def hours_of(text: str | None) -> int | None:
    """``7d`` / ``48h`` → hours (at least 1); ``None`` for anything else (callers say what
    they expected, naming their setting)."""
    m = _HOURS.match(text or "")
    if not m or int(m.group(1)) < 1:
        return None
    return int(m.group(1)) * (24 if m.group(2) == "d" else 1)
