"""Renames in the DDL silver records: a table's earlier names and its columns'.

Pure, but for :func:`load_renames`. ``RENAME TABLE a TO b[, c TO d]``, ``ALTER TABLE a …
RENAME [TO|AS] b``, ``ALTER TABLE a … RENAME COLUMN x TO y`` and ``CHANGE [COLUMN] x y …``
(statements of bronze's QUERY events, as ``silver/progress`` keeps them) become
:class:`Rename` facts at the statement's position. :func:`lineage` walks a table's names back
from a point (the rows of ``b`` at a point are those made under ``b`` since ``a`` was renamed
to it, and those of ``a`` before), :func:`column_maps` gives the column renames that apply to
the rows of each segment, and :func:`renamed` applies them to one image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from pipelines.lake.delta_ops import sql_string
from pipelines.silver.ddl import (_ALTER_TABLE, _IDENT, _QUALIFIED, _clean, _qualify, _unquote,
                                 clauses)

__all__ = ["Rename", "Segment", "renames_in", "renames", "lineage", "column_maps", "renamed",
           "segments_where", "load_renames", "load_ddl_rows", "gone", "forward"]

_ALTER = re.compile(_ALTER_TABLE + r"\s*(.*)$", re.I | re.S)
_RENAME_TABLES = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.I | re.S)
_PAIR = re.compile(rf"{_QUALIFIED}\s+(?:WAIT\s+\d+\s+|NOWAIT\s+)?TO\s+{_QUALIFIED}", re.I)
_TO_TABLE = re.compile(rf"^RENAME\s+(?:TO\s+|AS\s+)?(?!(?:COLUMN|INDEX|KEY)\b){_QUALIFIED}\s*$",
                       re.I)
_TO_COLUMN = re.compile(rf"^RENAME\s+COLUMN\s+({_IDENT})\s+TO\s+({_IDENT})", re.I)
_CHANGE = re.compile(rf"^CHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({_IDENT})\s+({_IDENT})", re.I)


@dataclass(frozen=True)
class Rename:
    """At position ``pos``: table ``old`` named ``new`` (the same for a column rename only),
    its columns renamed by ``columns`` ((old, new) pairs)."""

    pos: int
    old: tuple[str, str]
    new: tuple[str, str]
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Segment:
    """The rows of table ``name`` with ``lo < seq < hi``."""

    name: tuple[str, str]
    lo: int
    hi: int


def renames_in(query: str, default_schema: str | None
               ) -> list[tuple[tuple[str, str], tuple[str, str], tuple[tuple[str, str], ...]]]:
    """(old table, new table, column renames) of one statement; ``[]`` when it renames
    nothing."""
    q = _clean(query or "")
    m = _RENAME_TABLES.match(q)
    if m:
        return [(_qualify(a, b, default_schema), _qualify(c, d, default_schema), ())
                for a, b, c, d in _PAIR.findall(m.group(1))]
    m = _ALTER.match(q)
    if not m:
        return []
    table = _qualify(m.group(1), m.group(2), default_schema)
    new, columns = table, []
    for clause in clauses(m.group(3)):
        c = _TO_COLUMN.match(clause) or _CHANGE.match(clause)
        if c:
            old_c, new_c = _unquote(c.group(1)), _unquote(c.group(2))
            if old_c != new_c:
                columns.append((old_c, new_c))
            continue
        t = _TO_TABLE.match(clause)
        if t:
            new = _qualify(t.group(1), t.group(2), default_schema or table[0])
    if new == table and not columns:
        return []
    return [(table, new, tuple(columns))]


def renames(ddl_rows: Iterable[tuple]) -> list[Rename]:
    """The renames of ``ddl_rows`` ((source_id, binlog_file, start_pos, default_schema,
    query), silver/progress's form), in binlog order."""
    from pipelines.silver.naming import position_key

    out = []
    for _source, binlog_file, pos, schema, query in ddl_rows:
        for old, new, cols in renames_in(query or "", schema):
            out.append(Rename(position_key(binlog_file, pos), old, new, cols))
    return sorted(out, key=lambda r: r.pos)


def lineage(facts: Sequence[Rename], schema: str, table: str, cutoff: int) -> list[Segment]:
    """The names of ``schema.table``'s rows before ``cutoff``, newest first: its own since it
    was last renamed to it, the old name's before that, and so on."""
    segs: list[Segment] = []
    name, hi = (schema, table), cutoff
    for _ in range(64):
        moved = [r for r in facts if r.new == name and r.old != name and r.pos < hi]
        if not moved:
            break
        r = moved[-1]
        segs.append(Segment(name, r.pos, hi))
        name, hi = r.old, r.pos
    segs.append(Segment(name, -1, hi))
    return segs


def column_maps(facts: Sequence[Rename], segments: Sequence[Segment]
                ) -> list[tuple[int, dict[str, str]]]:
    """(position, old → new column names) of the column renames of the segments' tables,
    oldest first: a row at ``seq`` takes every map of a position after it."""
    out = []
    for r in facts:
        if r.columns and any(r.old == s.name and s.lo < r.pos < s.hi for s in segments):
            out.append((r.pos, dict(r.columns)))
    return out


def renamed(values: dict[str, str] | None, seq: int,
            maps: Sequence[tuple[int, dict[str, str]]]) -> dict[str, str] | None:
    """``values`` (an image at ``seq``) with the column names of the renames after it."""
    if values is None:
        return None
    for pos, names in maps:
        if pos > seq:
            values = {names.get(k, k): v for k, v in values.items()}
    return values


def forward(facts: Sequence[Rename], name: tuple[str, str], seq: int
            ) -> tuple[tuple[str, str], list[tuple[int, dict[str, str]]]]:
    """The name a change of table ``name`` at ``seq`` is under today, and the column renames
    since (for :func:`renamed`)."""
    maps = []
    for r in facts:
        if r.pos > seq and r.old == name:
            if r.columns:
                maps.append((r.pos, dict(r.columns)))
            name = r.new
    return name, maps


def segments_where(segments: Sequence[Segment]) -> str:
    """A SQL predicate on silver's rows of the segments."""
    parts = []
    for s in segments:
        cond = (f"schema_name = {sql_string(s.name[0])} AND table_name = "
                f"{sql_string(s.name[1])} AND seq < {int(s.hi)}")
        if s.lo >= 0:
            cond += f" AND seq > {int(s.lo)}"
        parts.append(f"({cond})")
    return " OR ".join(parts)


def gone(ddl_rows: Iterable[tuple], tables: Iterable[tuple[str, str]]
         ) -> dict[tuple[str, str], str]:
    """Of ``tables``, those whose name is gone at the end of ``ddl_rows`` (its last DDL a
    ``DROP TABLE``, ``DROP DATABASE`` or a rename away, no CREATE or rename to it since):
    table → ``dropped at FILE:POS`` or ``renamed to S.T at FILE:POS``."""
    from pipelines.silver.ddl import DROP_DATABASE, tables_touched
    from pipelines.silver.naming import position_key

    wanted = set(tables)
    last: dict[tuple[str, str], tuple[int, str | None]] = {}
    for _source, binlog_file, pos, schema, query in ddl_rows:
        at, where = position_key(binlog_file, pos), f"{binlog_file}:{pos}"
        moves = renames_in(query or "", schema)
        for old, new, _cols in moves:
            if old != new:
                last[old] = (at, f"renamed to {new[0]}.{new[1]} at {where}")
                last[new] = (at, None)
        if moves:
            continue
        q = _clean(query or "").upper()
        for name in tables_touched(query or "", schema):
            hit = [t for t in wanted if t == name or (name[1] == DROP_DATABASE
                                                      and t[0] == name[0])]
            for t in hit:
                if q.startswith("DROP"):
                    last[t] = (at, f"dropped at {where}")
                elif q.startswith("CREATE"):
                    last[t] = (at, None)
    return {t: last[t][1] for t in sorted(wanted) if t in last and last[t][1]}


def load_ddl_rows(spark, lake) -> list[tuple]:
    """The QUERY events silver recorded per file (``silver/progress``), in binlog order:
    (source_id, binlog_file, start_pos, default_schema, query)."""
    import json

    from pipelines.silver.naming import position_key
    from pipelines.silver.progress import load_progress

    rows = [(s, f, *q) for (s, f), r in load_progress(spark, lake).items()
            for q in json.loads(r["ddl"] or "[]")]
    return sorted(rows, key=lambda r: position_key(r[1], r[2]))


def load_renames(spark, lake) -> list[Rename]:
    """The renames of the QUERY events silver recorded per file (``silver/progress``)."""
    return renames(load_ddl_rows(spark, lake))
