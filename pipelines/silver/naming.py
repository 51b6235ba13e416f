"""Pure: which schema names a bronze row change — or why none can, without guessing.

Rules (``docs/silver.md``):

* A table's *schema epochs* are delimited by the DDL events touching it (``ddl.py``), in
  binlog order per source. Positions compare as ``file_number << 32 | pos``.
* A snapshot is valid for an epoch when its recorded binlog coordinates fall inside it:
  ``epoch_start < coordinate <= epoch_end`` (a snapshot taken just before a DDL records the
  DDL's own start position, so it belongs to the epoch that DDL ends).
* TABLE_MAP column names (``binlog_row_metadata=FULL``) name the event; a valid snapshot, when
  there is one, must agree with them (count and names) and adds what the binlog lacks
  (MariaDB JSON columns). Without names, the valid snapshot names the event.
* Anything else — no names and no valid snapshot, a column count that disagrees, names that
  disagree — is a quarantine reason.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterable, Mapping, Sequence

from pipelines.binlog.names import file_number, position_key
from pipelines.binlog import coltypes as T
from pipelines.errors import SchemaMismatchError
from pipelines.silver.charsets import charset_for_collation
from pipelines.silver.ddl import DROP_DATABASE, tables_touched
from pipelines.silver.render import ColumnSpec

__all__ = ["position_key", "file_number", "TableSpec", "NamingPlan", "BronzeTableMap",
           "TABLE_MAP_COLUMNS"]

_NO_PK = "all_columns"


@dataclass(frozen=True)
class BronzeTableMap:
    """The TABLE_MAP facts of a row change (bronze's TABLE_MAP row, see
    ``records.TABLE_MAP_FIELDS``)."""

    column_types: tuple[int, ...]
    column_meta: tuple[int, ...]
    column_names: tuple[str, ...] | None = None
    column_unsigned: tuple[bool, ...] | None = None
    column_charsets: tuple[int | None, ...] | None = None
    primary_key: tuple[int, ...] | None = None
    enum_values: tuple[tuple[str, ...] | None, ...] | None = None
    set_values: tuple[tuple[str, ...] | None, ...] | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "BronzeTableMap":
        """The facts of one bronze row or TABLE_MAP row (a mapping of its columns; lists
        become tuples)."""
        return cls(*[_tuple(row[c]) for c in TABLE_MAP_COLUMNS])


def _tuple(value):
    if value is None:
        return None
    return tuple(_tuple(x) if isinstance(x, list) else x for x in value)


# The bronze columns naming reads, in BronzeTableMap's order.
TABLE_MAP_COLUMNS = [f.name for f in fields(BronzeTableMap)]


@dataclass(frozen=True)
class TableSpec:
    """How to name and render one table's row images in one epoch."""

    columns: tuple[ColumnSpec, ...]
    pk: tuple[int, ...]  # column indexes forming pk_values, in table ordinal order
    pk_kind: str  # "primary_key" | "all_columns" (a table without PRIMARY KEY)
    schema_version: str  # snapshot_id, or "binlog"

    def over(self, columns: Sequence[ColumnSpec]) -> "TableSpec":
        """This spec over other ``columns`` (some added, some gone): the key keeps those of
        its columns that remain, found by name."""
        index = {c.name: i for i, c in enumerate(columns)}
        pk = tuple(index[self.columns[i].name] for i in self.pk
                   if self.columns[i].name in index)
        return replace(self, columns=tuple(columns), pk=pk)


def _is_binary_type(data_type: str | None) -> bool:
    return (data_type or "").lower() in ("binary", "varbinary", "tinyblob", "blob",
                                         "mediumblob", "longblob", "geometry", "point")


def _snapshot_charset(col: Any) -> str | None:
    if getattr(col, "charset", None):
        return col.charset
    if _is_binary_type(col.data_type):
        return "binary"
    return None


@dataclass
class NamingPlan:
    """Per source: DDL positions per table and the snapshots, ready for :meth:`resolve`."""

    ddl: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    snapshots: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    # table_map_hash → the facts of bronze's TABLE_MAP rows (``bronze.table_maps``)
    table_maps: dict[int, dict[str, Any]] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)
    _merged: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, ddl_rows: Iterable[tuple[str, str, int, str | None, str]],
              snapshots: Sequence[Any]) -> "NamingPlan":
        """``ddl_rows``: (source_id, binlog_file, start_pos, default_schema, query) of bronze
        QUERY rows; ``snapshots``: ``source.model.Snapshot`` objects."""
        plan = cls()
        for source, binlog_file, pos, default_schema, query in ddl_rows:
            for schema, table in tables_touched(query or "", default_schema):
                plan.ddl.setdefault((source, schema, table), []).append(
                    position_key(binlog_file, pos))
        for positions in plan.ddl.values():
            positions.sort()
        for snap in snapshots:
            coord = (position_key(snap.binlog_file, snap.binlog_pos)
                     if snap.binlog_file else (1 << 63) - 1)
            plan.snapshots.setdefault(snap.source_id, []).append((coord, snap))
        for snaps in plan.snapshots.values():
            snaps.sort(key=lambda cs: cs[0])
        return plan

    def _ddl_positions(self, source: str, schema: str, table: str) -> list[int]:
        """The table's DDL positions merged with its schema's DROP DATABASEs (built once)."""
        key = (source, schema, table)
        merged = self._merged.get(key)
        if merged is None:
            merged = self._merged[key] = sorted(
                self.ddl.get(key, []) + self.ddl.get((source, schema, DROP_DATABASE), []))
        return merged

    def epoch(self, source: str, schema: str, table: str, key: int) -> tuple[int, int]:
        """(start, end) DDL positions around ``key`` for the table (open bounds as ±inf)."""
        ddls = self._ddl_positions(source, schema, table)
        i = bisect.bisect_left(ddls, key)
        start = ddls[i - 1] if i > 0 else -1
        end = ddls[i] if i < len(ddls) else 1 << 63
        return start, end

    def snapshot_for(self, source: str, schema: str, table: str, key: int) -> Any | None:
        """The latest snapshot valid in the schema epoch holding ``key``, or ``None``."""
        return self._snapshot_in(source, schema, table, self.epoch(source, schema, table, key))

    def _snapshot_in(self, source: str, schema: str, table: str,
                     bounds: tuple[int, int]) -> Any | None:
        start, end = bounds
        best = None
        for coord, snap in self.snapshots.get(source, []):
            if start < coord <= end and (schema, table) in snap.tables:
                best = snap  # sorted by coordinate: the latest valid one wins
        return best

    def _any_table_schema(self, source: str, schema: str, table: str) -> Any | None:
        found = None
        for _, snap in self.snapshots.get(source, []):
            found = snap.tables.get((schema, table), found)
        return found

    def resolve(self, source: str, schema: str, table: str, binlog_file: str, pos: int,
                tm: BronzeTableMap) -> TableSpec:
        """The :class:`TableSpec` naming this row change; raises :class:`SchemaMismatchError`
        with the quarantine reason when no schema names it without guessing."""
        bounds = self.epoch(source, schema, table, position_key(binlog_file, pos))
        # The epoch decides the snapshot, so (table, epoch, TABLE_MAP) decides the spec.
        cache_key = (source, schema, table, bounds, tm)
        hit = self._cache.get(cache_key)
        if hit is None:
            snap = self._snapshot_in(source, schema, table, bounds)
            try:
                hit = self._build(source, schema, table, snap, tm, bounds)
            except SchemaMismatchError as exc:
                hit = exc
            self._cache[cache_key] = hit
        if isinstance(hit, SchemaMismatchError):
            raise hit
        return hit

    def _build(self, source: str, schema: str, table: str, snap: Any | None,
               tm: BronzeTableMap, bounds: tuple[int, int]) -> TableSpec:
        n = len(tm.column_types)
        ts = snap.tables[(schema, table)] if snap is not None else None
        if ts is not None and len(ts.columns) != n:
            raise SchemaMismatchError(
                f"column count {n} in the binlog but {len(ts.columns)} in snapshot "
                f"{snap.snapshot_id}")
        if tm.column_names is not None:
            names = list(tm.column_names)
            if ts is not None and [c.name for c in ts.columns] != names:
                raise SchemaMismatchError(
                    f"binlog column names {names} differ from snapshot {snap.snapshot_id}")
        elif ts is not None:
            names = [c.name for c in ts.columns]
        else:
            start, end = bounds
            raise SchemaMismatchError(
                "no schema: the binlog carries no column names (binlog_row_metadata=MINIMAL) "
                "and no snapshot is valid for this table's schema epoch"
                + (" (after a DDL)" if start >= 0 else "")
                + (" (before a DDL)" if end < 1 << 63 else ""))
        # For FULL-metadata epochs without a snapshot, JSON-ness (MariaDB's LONGTEXT with a
        # json_valid CHECK is invisible in the binlog) comes from the table's latest snapshot
        # column of the same name.
        json_source = ts or self._any_table_schema(source, schema, table)
        json_cols = {c.name for c in json_source.columns if c.is_json} if json_source else set()
        cols = []
        for i in range(n):
            t = tm.column_types[i]
            meta = tm.column_meta[i]
            scol = ts.columns[i] if ts is not None else None
            charset = None
            if tm.column_charsets is not None and tm.column_charsets[i] is not None:
                charset = charset_for_collation(tm.column_charsets[i])
            if charset is None and scol is not None:
                charset = _snapshot_charset(scol)
            if charset is None and t in (T.JSON, T.GEOMETRY, T.VECTOR):
                charset = "binary"
            fix_unsigned = (t in T.INTEGER_TYPES and tm.column_unsigned is None
                            and scol is not None and scol.unsigned)
            enum_values = tm.enum_values[i] if tm.enum_values and tm.enum_values[i] else None
            set_values = tm.set_values[i] if tm.set_values and tm.set_values[i] else None
            if enum_values is None and scol is not None and scol.enum_values is not None:
                enum_values = tuple(scol.enum_values)
            if set_values is None and scol is not None and scol.set_values is not None:
                set_values = tuple(scol.set_values)
            pad = meta if (t == T.STRING and charset == "binary") else 0
            cols.append(ColumnSpec(names[i], t, meta, bool(fix_unsigned), charset,
                                   enum_values, set_values, names[i] in json_cols, pad))
        if tm.primary_key:
            pk, kind = tuple(sorted(tm.primary_key)), "primary_key"
        elif ts is not None and any(c.pk_ordinal for c in ts.columns):
            pk = tuple(i for i, c in enumerate(ts.columns) if c.pk_ordinal)
            kind = "primary_key"
        else:
            pk, kind = tuple(range(n)), _NO_PK
        version = snap.snapshot_id if snap is not None else "binlog"
        return TableSpec(tuple(cols), pk, kind, version)
