"""Pure: the schema epochs in which a table's cascading FK rules are unknown.

Silver derives the child rows an ``ON DELETE`` / ``ON UPDATE`` ``CASCADE`` or ``SET NULL``
rule changed from the rules of the snapshot valid in the child's schema epoch
(``derive``). Where a table is known to have such rules — a snapshot records one, or a
``CREATE``/``ALTER TABLE`` in bronze declares one — but no snapshot lies in one of its
epochs, the rules of that epoch are unknown: nothing is derived there, and the readers
(reconstruct, mirror, flashback) say so instead of answering silently wrong. A snapshot
taken in that epoch closes the gap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from pipelines.silver.ddl import DROP_DATABASE, _clean, tables_touched
from pipelines.silver.derive import cascading_rules, underived_columns
from pipelines.silver.naming import NamingPlan, position_key
from pipelines.silver.partitions import partition_effects

__all__ = ["FkGap", "fk_gaps", "partition_gaps", "column_gaps"]

_ACTION = re.compile(r"\bON\s+(?:DELETE|UPDATE)\s+(?:CASCADE|SET\s+NULL|SET\s+DEFAULT)\b", re.I)
_INF = 1 << 63


@dataclass(frozen=True)
class FkGap:
    """A schema epoch of a table with cascading FK rules that no snapshot describes."""

    source: str
    schema: str
    table: str
    start: int  # position key of the DDL opening the epoch (-1: before the lake's first)
    end: int  # the next DDL's (2^63: none)
    opened_at: str  # 'file:pos' of that DDL, or 'the start of the binlogs'
    # None: FK rules unknown; else what made the history incomplete from ``start`` on
    reason: str | None = None

    def overlaps(self, lo: int, hi: int) -> bool:
        return self.start < hi and lo < self.end

    def describe(self) -> str:
        if self.reason is not None:
            return f"{self.schema}.{self.table}: {self.reason}"
        return (f"{self.schema}.{self.table}: its ON DELETE/ON UPDATE rules are unknown from "
                f"{self.opened_at} on (no schema snapshot describes that schema epoch): row "
                "changes a CASCADE or SET NULL rule made there are not in silver; take a "
                "`binlake snapshot` in that epoch")


def fk_gaps(ddl_rows: Iterable[tuple], snapshots: list, plan: NamingPlan) -> list[FkGap]:
    """The gaps of every table with cascading FK rules. ``ddl_rows``: (source, file, pos,
    default schema, query) of bronze's QUERY events; ``plan`` built from them and
    ``snapshots``."""
    children: set[tuple[str, str, str]] = set()
    for snap in snapshots:
        for rule in cascading_rules(snap.fks):
            children.add((snap.source_id, *rule.child))
    kinds: dict[tuple[str, str, str, int], str] = {}
    for source, file, pos, default_schema, query in ddl_rows:
        text = _clean(query or "")
        touched = tables_touched(text, default_schema)
        kind = text[:6].upper()
        for schema, table in touched:
            kinds[(source, schema, table, position_key(file, pos))] = f"{kind}@{file}:{pos}"
            if kind in ("CREATE", "ALTER ") and _ACTION.search(text):
                children.add((source, schema, table))
    def kind_at(source: str, schema: str, table: str, pos: int) -> str:
        return kinds.get((source, schema, table, pos)) or kinds.get(
            (source, schema, DROP_DATABASE, pos), "")

    out = []
    for source, schema, table in sorted(children):
        marks = plan._ddl_positions(source, schema, table)
        bounds = [-1, *marks, _INF]
        for start, end in zip(bounds, bounds[1:]):
            opened = kind_at(source, schema, table, start)
            if start == -1 and marks and kind_at(source, schema, table, marks[0]).startswith(
                    ("CREATE", "DROP")):
                # the table did not exist before its CREATE; before a DROP, its rows are
                # older than the binlogs (no last image to derive from either way)
                continue
            if opened.startswith("DROP"):
                continue  # gone (DROP TABLE, DROP DATABASE) until the next DDL
            if plan._snapshot_in(source, schema, table, (start, end)) is not None:
                continue
            where = opened.split("@", 1)[1] if "@" in opened else "the start of the binlogs"
            out.append(FkGap(source, schema, table, start, end, where))
    return out + partition_gaps(ddl_rows) + column_gaps(ddl_rows)


def partition_gaps(ddl_rows: Iterable[tuple]) -> list[FkGap]:
    """``ALTER TABLE … DROP|TRUNCATE PARTITION p`` whose rows silver cannot derive (the
    table's partitioning unknown or of a kind the lake cannot evaluate,
    ``partitions.partition_effects``), and ``EXCHANGE PARTITION``: the table's history after
    it may hold rows the server removed."""
    out = []
    for e in partition_effects(ddl_rows):
        if e.reason is None:
            continue
        schema, table = e.table
        what = f"{e.verb} PARTITION" + (f" {', '.join(e.names)}" if e.names else "")
        out.append(FkGap(e.source, schema, table, position_key(e.file, e.pos), _INF,
                         f"{e.file}:{e.pos}",
                         f"{what} at {e.file}:{e.pos} changed rows silver does not "
                         f"know ({e.reason}): later states may hold rows the server no "
                         "longer has"))
    return out


def column_gaps(ddl_rows: Iterable[tuple]) -> list[FkGap]:
    """``ALTER TABLE … ADD COLUMN`` whose value for the existing rows silver does not derive
    (``column_defaults.Underived``): the rows' later states lack it until they change."""
    out = []
    for source, file, pos, default_schema, query in ddl_rows:
        found = underived_columns(query or "", default_schema)
        if found is None:
            continue
        (schema, table), columns = found
        what = "; ".join(f"{name}: {reason}" for name, reason in columns)
        out.append(FkGap(source, schema, table, position_key(file, pos), _INF, f"{file}:{pos}",
                         f"ADD COLUMN at {file}:{pos} gave the existing rows a value silver "
                         f"does not derive ({what}): their images lack it until they change"))
    return out
