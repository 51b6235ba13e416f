"""What a schema snapshot is: tables, columns, foreign keys and the binlog coordinates where it
was true. Pure data and conversions (flat Delta rows, JSON); no I/O.

A snapshot is stored flat, one row per column (``SNAPSHOT_COLUMNS``, the layout of
``<lake>/silver/schema_snapshots`` in docs/silver.md) and one row per foreign-key column
(``FK_COLUMNS``). A snapshot with no tables at all is stored as one row whose
schema_name/table_name/column_name are NULL, so that it is not lost.

Tables without a PRIMARY KEY: ``TableSchema.pk_kind`` is ``"all_columns"`` and
``TableSchema.pk_columns`` is every column in ordinal order; silver forms pk_values from all of
them exactly as from a real key (rendered, escaped, joined by ``|``). A UNIQUE NOT NULL key that
the server shows as ``COLUMN_KEY = 'PRI'`` is not a primary key here: only the index named
``PRIMARY`` is.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pipelines.binlog.names import seq_of, split_binlog_name
from pipelines.lake.tables import FK_CONSTRAINTS, SCHEMA_SNAPSHOTS, SOURCE_CHECKS

__all__ = [
    "ColumnSchema", "TableSchema", "ForeignKey", "Snapshot", "SourceCheck", "CHECK_LEVELS",
    "SNAPSHOT_COLUMNS", "FK_COLUMNS", "CHECK_COLUMNS", "parse_enum_values", "binlog_file_number",
    "snapshot_to_rows", "fk_to_rows", "checks_to_rows", "snapshots_from_rows",
    "snapshot_to_json", "snapshot_from_json", "check_to_json", "check_from_json", "JSON_FORMAT",
    "JSON_VERSION",
]

CHECK_LEVELS = ("ok", "warn", "refuse")

# Flat layouts, in Delta column order: declared once in the lake registry.
SNAPSHOT_COLUMNS: tuple[tuple[str, str], ...] = SCHEMA_SNAPSHOTS.columns
FK_COLUMNS: tuple[tuple[str, str], ...] = FK_CONSTRAINTS.columns
CHECK_COLUMNS: tuple[tuple[str, str], ...] = SOURCE_CHECKS.columns

_TEMPORAL_FSP = ("datetime", "timestamp", "time")
_FSP = re.compile(r"^\w+\((\d+)\)")
# Backslash escapes MySQL writes in COLUMN_TYPE (sql/sql_show.cc append_unescaped) and the
# SQL-standard ones a parser accepts; any other "\x" is "x".
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def parse_enum_values(column_type: str) -> list[str]:
    """The labels of ``enum('a','b''c')`` / ``set(...)`` as written in COLUMN_TYPE.

    Quotes inside a label are doubled (``''``) or backslash-escaped; ``\\\\`` is a backslash.
    Raises :class:`ValueError` on text that is not a quoted, comma-separated list.
    """
    open_at = column_type.find("(")
    if open_at < 0 or not column_type.rstrip().endswith(")"):
        raise ValueError(f"not an enum/set type: {column_type!r}")
    body = column_type[open_at + 1: column_type.rstrip().rfind(")")]
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i] in " \t":
            i += 1
        if i >= n or body[i] != "'":
            raise ValueError(f"expected a quoted label at {i} in {column_type!r}")
        i += 1
        buf: list[str] = []
        while True:
            if i >= n:
                raise ValueError(f"unterminated label in {column_type!r}")
            ch = body[i]
            if ch == "\\" and i + 1 < n:
                buf.append(_ESCAPES.get(body[i + 1], body[i + 1]))
                i += 2
            elif ch == "'":
                if i + 1 < n and body[i + 1] == "'":
                    buf.append("'")
                    i += 2
                else:
                    i += 1
                    break
            else:
                buf.append(ch)
                i += 1
        out.append("".join(buf))
        while i < n and body[i] in " \t":
            i += 1
        if i < n:
            if body[i] != ",":
                raise ValueError(f"expected ',' at {i} in {column_type!r}")
            i += 1
            if not body[i:].strip(" \t"):
                raise ValueError(f"a label must follow ',' in {column_type!r}")
    return out


def binlog_file_number(binlog_file: str) -> int:
    """``mysql-bin.000042`` → 42; raises :class:`ValueError` when there is no numeric suffix."""
    parts = split_binlog_name(binlog_file)
    if parts is None:
        raise ValueError(f"binlog file name without a numeric suffix: {binlog_file!r}")
    return parts[1]


@dataclass(frozen=True)
class ColumnSchema:
    """One column as information_schema.COLUMNS shows it.

    ``data_type`` is lower-case (``int``, ``enum``, ``longtext``); ``column_type`` the full
    type (``int(10) unsigned zerofill``, ``enum('a','b')``, ``datetime(6)``); ``default`` the
    COLUMN_DEFAULT text as the server shows it (MariaDB quotes literals and shows ``NULL``);
    ``is_json`` is true for MySQL JSON and MariaDB's LONGTEXT with a ``json_valid`` CHECK;
    ``pk_ordinal`` is the 1-based position in the PRIMARY KEY, None outside it.
    """

    name: str
    ordinal: int
    data_type: str
    column_type: str
    charset: str | None = None
    collation: str | None = None
    nullable: bool = True
    default: str | None = None
    generated: bool = False
    is_json: bool = False
    pk_ordinal: int | None = None
    column_key: str = ""

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower().split()

    @property
    def zerofill(self) -> bool:
        return "zerofill" in self.column_type.lower().split()

    @property
    def enum_values(self) -> list[str] | None:
        return parse_enum_values(self.column_type) if self.data_type.lower() == "enum" else None

    @property
    def set_values(self) -> list[str] | None:
        return parse_enum_values(self.column_type) if self.data_type.lower() == "set" else None

    @property
    def fsp(self) -> int | None:
        """Fractional seconds digits of DATETIME/TIMESTAMP/TIME (0 when not given), else None."""
        if self.data_type.lower() not in _TEMPORAL_FSP:
            return None
        m = _FSP.match(self.column_type)
        return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class TableSchema:
    """A base table's columns in ordinal order."""

    schema: str
    table: str
    columns: list[ColumnSchema] = field(default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", sorted(self.columns, key=lambda c: c.ordinal))

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def primary_key(self) -> list[str]:
        """The PRIMARY KEY's columns in key order (``PRIMARY KEY (b, a)`` → ``[b, a]``)."""
        keyed = sorted((c for c in self.columns if c.pk_ordinal is not None),
                       key=lambda c: c.pk_ordinal)  # type: ignore[arg-type,return-value]
        return [c.name for c in keyed]

    @property
    def has_primary_key(self) -> bool:
        return any(c.pk_ordinal is not None for c in self.columns)

    @property
    def pk_kind(self) -> str:
        """``"primary_key"``, or ``"all_columns"`` for a table without one (module docstring)."""
        return "primary_key" if self.has_primary_key else "all_columns"

    @property
    def pk_columns(self) -> list[str]:
        """Columns pk_values is formed from, in table ordinal order (docs/silver.md)."""
        if not self.has_primary_key:
            return self.column_names
        return [c.name for c in self.columns if c.pk_ordinal is not None]

    def column(self, name: str) -> ColumnSchema:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.schema}.{self.table} has no column {name!r}")


@dataclass(frozen=True)
class ForeignKey:
    """One column of a FOREIGN KEY constraint (KEY_COLUMN_USAGE ⋈ REFERENTIAL_CONSTRAINTS)."""

    constraint_schema: str
    constraint_name: str
    table_schema: str
    table_name: str
    column_name: str
    ordinal_position: int
    referenced_table_schema: str
    referenced_table_name: str
    referenced_column_name: str
    update_rule: str
    delete_rule: str

    @property
    def cascades(self) -> bool:
        """True when a parent change makes the server change child rows itself."""
        return any(r in ("CASCADE", "SET NULL", "SET DEFAULT")
                   for r in (self.update_rule, self.delete_rule))


@dataclass(frozen=True)
class SourceCheck:
    """One verdict on the source server: ``ok``, ``warn``, or ``refuse`` (data would be wrong)."""

    level: str
    name: str
    detail: str

    def __post_init__(self) -> None:
        if self.level not in CHECK_LEVELS:
            raise ValueError(f"check level must be one of {CHECK_LEVELS}: {self.level!r}")


@dataclass(frozen=True)
class Snapshot:
    """Every table of the chosen schemas at one binlog position of one server."""

    snapshot_id: str
    snapshot_time: dt.datetime  # UTC, naive
    source_id: str
    server_id: int | None
    server_uuid: str | None
    server_version: str | None
    binlog_file: str | None
    binlog_pos: int | None
    gtid_executed: str | None
    tables: dict[tuple[str, str], TableSchema] = field(default_factory=dict)
    fks: list[ForeignKey] = field(default_factory=list)

    @property
    def coordinate(self) -> tuple[int, int] | None:
        """(binlog file number, position), comparable within one source; None without binlog."""
        if self.binlog_file is None or self.binlog_pos is None:
            return None
        return binlog_file_number(self.binlog_file), self.binlog_pos

    @property
    def seq(self) -> int | None:
        """The coordinate on silver's ``seq`` scale: ``file_number * 2^32 + binlog_pos``."""
        c = self.coordinate
        return None if c is None else seq_of(*c)

    @property
    def column_count(self) -> int:
        return sum(len(t.columns) for t in self.tables.values())

    @property
    def constraint_names(self) -> list[tuple[str, str]]:
        """Distinct (constraint_schema, constraint_name) of the foreign keys."""
        return sorted({(f.constraint_schema, f.constraint_name) for f in self.fks})

    def table(self, schema: str, table: str) -> TableSchema:
        try:
            return self.tables[(schema, table)]
        except KeyError:
            raise KeyError(f"snapshot {self.snapshot_id} has no table {schema}.{table}") from None


# -- flat rows -------------------------------------------------------------------------------

def _header(s: Snapshot) -> tuple[Any, ...]:
    return (s.snapshot_id, s.snapshot_time, s.source_id, s.server_id, s.server_uuid,
            s.server_version, s.binlog_file, s.binlog_pos, s.gtid_executed)


def snapshot_to_rows(s: Snapshot) -> list[tuple[Any, ...]]:
    """One tuple per column in ``SNAPSHOT_COLUMNS`` order (one NULL-table row if no tables)."""
    head = _header(s)
    rows = []
    for (schema, table), t in sorted(s.tables.items()):
        for c in t.columns:
            rows.append(head + (schema, table, c.name, c.ordinal, c.column_key, c.data_type,
                                c.column_type, c.charset, c.collation, c.nullable, c.default,
                                c.generated, c.is_json, c.pk_ordinal))
    if not rows:
        rows.append(head + (None,) * (len(SNAPSHOT_COLUMNS) - len(head)))
    return rows


def fk_to_rows(s: Snapshot) -> list[tuple[Any, ...]]:
    """One tuple per foreign-key column in ``FK_COLUMNS`` order."""
    return [(s.snapshot_id, s.snapshot_time, s.source_id, f.constraint_schema, f.constraint_name,
             f.table_schema, f.table_name, f.column_name, f.ordinal_position,
             f.referenced_table_schema, f.referenced_table_name, f.referenced_column_name,
             f.update_rule, f.delete_rule) for f in s.fks]


def checks_to_rows(s: Snapshot, checks: Sequence[SourceCheck]) -> list[tuple[Any, ...]]:
    return [(s.snapshot_id, s.source_id, c.level, c.name, c.detail) for c in checks]


def _get(row: Any, key: str) -> Any:
    return row[key]  # works for dicts and pyspark Rows alike


def snapshots_from_rows(rows: Iterable[Mapping[str, Any]],
                        fk_rows: Iterable[Mapping[str, Any]] = ()) -> list[Snapshot]:
    """Rebuild snapshots from flat rows (any order), in first-seen snapshot_id order."""
    heads: dict[str, tuple[Any, ...]] = {}
    cols: dict[str, dict[tuple[str, str], list[ColumnSchema]]] = {}
    for r in rows:
        sid = _get(r, "snapshot_id")
        if sid not in heads:
            heads[sid] = tuple(_get(r, k) for k, _ in SNAPSHOT_COLUMNS[:9])
            cols[sid] = {}
        if _get(r, "table_name") is None:
            continue
        cols[sid].setdefault((_get(r, "schema_name"), _get(r, "table_name")), []).append(
            ColumnSchema(
                name=_get(r, "column_name"), ordinal=int(_get(r, "ordinal_position")),
                data_type=_get(r, "data_type"), column_type=_get(r, "column_type"),
                charset=_get(r, "character_set_name"), collation=_get(r, "collation_name"),
                nullable=bool(_get(r, "is_nullable")), default=_get(r, "column_default"),
                generated=bool(_get(r, "is_generated")), is_json=bool(_get(r, "is_json")),
                pk_ordinal=_get(r, "pk_ordinal"), column_key=_get(r, "column_key") or ""))
    fks: dict[str, list[ForeignKey]] = {}
    for r in fk_rows:
        fks.setdefault(_get(r, "snapshot_id"), []).append(ForeignKey(
            **{k: _get(r, k) for k, _ in FK_COLUMNS[3:]}))
    out = []
    for sid, head in heads.items():
        tables = {key: TableSchema(key[0], key[1], cs) for key, cs in sorted(cols[sid].items())}
        (_, time, source, server_id, uuid, version, bfile, bpos, gtid) = head
        out.append(Snapshot(sid, time, source, server_id, uuid, version, bfile, bpos, gtid,
                            tables, sorted(fks.get(sid, []), key=_fk_order)))
    return out


def _fk_order(f: ForeignKey) -> tuple[Any, ...]:
    return (f.table_schema, f.table_name, f.constraint_name, f.ordinal_position)


# -- JSON (export/import) --------------------------------------------------------------------

JSON_FORMAT = "binlake-schema-snapshot"
JSON_VERSION = 1
_COLUMN_KEYS = ("name", "ordinal", "data_type", "column_type", "charset", "collation",
                "nullable", "default", "generated", "is_json", "pk_ordinal", "column_key")


def snapshot_to_json(s: Snapshot) -> dict[str, Any]:
    """A JSON-ready dict; ``snapshot_time`` as ISO 8601 UTC text."""
    return {
        "snapshot_id": s.snapshot_id,
        "snapshot_time": s.snapshot_time.isoformat(),
        "source_id": s.source_id,
        "server_id": s.server_id,
        "server_uuid": s.server_uuid,
        "server_version": s.server_version,
        "binlog_file": s.binlog_file,
        "binlog_pos": s.binlog_pos,
        "gtid_executed": s.gtid_executed,
        "tables": [{"schema": t.schema, "table": t.table,
                    "columns": [{k: getattr(c, k) for k in _COLUMN_KEYS} for c in t.columns]}
                   for _, t in sorted(s.tables.items())],
        "fks": [{k: getattr(f, k) for k, _ in FK_COLUMNS[3:]} for f in s.fks],
    }


def _typed(obj: Mapping[str, Any], key: str, types: tuple[type, ...], where: str,
           *, optional: bool = False) -> Any:
    if key not in obj:
        raise ValueError(f"{where}: missing {key!r}")
    value = obj[key]
    if value is None and optional:
        return None
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise ValueError(f"{where}: {key!r} must be {'/'.join(t.__name__ for t in types)}"
                         f"{' or null' if optional else ''}, got {value!r}")
    return value


def snapshot_from_json(obj: Any) -> Snapshot:
    """Validate and rebuild a snapshot from :func:`snapshot_to_json` output.

    Raises :class:`ValueError` naming the first bad field.
    """
    if not isinstance(obj, dict):
        raise ValueError("snapshot: expected a JSON object")
    w = "snapshot"
    sid = _typed(obj, "snapshot_id", (str,), w)
    if not sid:
        raise ValueError("snapshot: empty snapshot_id")
    try:
        time = dt.datetime.fromisoformat(_typed(obj, "snapshot_time", (str,), w))
    except ValueError as exc:
        raise ValueError(f"snapshot: snapshot_time is not ISO 8601: {exc}") from None
    if time.tzinfo is not None:
        time = time.astimezone(dt.timezone.utc).replace(tzinfo=None)
    bfile = _typed(obj, "binlog_file", (str,), w, optional=True)
    if bfile is not None:
        binlog_file_number(bfile)
    tables: dict[tuple[str, str], TableSchema] = {}
    for i, t in enumerate(_typed(obj, "tables", (list,), w)):
        tw = f"snapshot.tables[{i}]"
        if not isinstance(t, dict):
            raise ValueError(f"{tw}: expected an object")
        schema, table = _typed(t, "schema", (str,), tw), _typed(t, "table", (str,), tw)
        columns = []
        for j, c in enumerate(_typed(t, "columns", (list,), tw)):
            cw = f"{tw}.columns[{j}]"
            if not isinstance(c, dict):
                raise ValueError(f"{cw}: expected an object")
            columns.append(ColumnSchema(
                name=_typed(c, "name", (str,), cw), ordinal=_typed(c, "ordinal", (int,), cw),
                data_type=_typed(c, "data_type", (str,), cw),
                column_type=_typed(c, "column_type", (str,), cw),
                charset=_typed(c, "charset", (str,), cw, optional=True),
                collation=_typed(c, "collation", (str,), cw, optional=True),
                nullable=_typed(c, "nullable", (bool,), cw),
                default=_typed(c, "default", (str,), cw, optional=True),
                generated=_typed(c, "generated", (bool,), cw),
                is_json=_typed(c, "is_json", (bool,), cw),
                pk_ordinal=_typed(c, "pk_ordinal", (int,), cw, optional=True),
                column_key=_typed(c, "column_key", (str,), cw)))
            if columns[-1].data_type in ("enum", "set"):
                parse_enum_values(columns[-1].column_type)
        if not columns:
            raise ValueError(f"{tw}: a table without columns")
        if (schema, table) in tables:
            raise ValueError(f"{tw}: {schema}.{table} appears twice")
        if len({c.ordinal for c in columns}) != len(columns):
            raise ValueError(f"{tw}: repeated ordinal positions")
        tables[(schema, table)] = TableSchema(schema, table, columns)
    fks = []
    for i, f in enumerate(_typed(obj, "fks", (list,), w)):
        fw = f"snapshot.fks[{i}]"
        if not isinstance(f, dict):
            raise ValueError(f"{fw}: expected an object")
        fks.append(ForeignKey(**{k: _typed(f, k, (int,) if t == "int" else (str,), fw)
                                 for k, t in FK_COLUMNS[3:]}))
    return Snapshot(
        snapshot_id=sid, snapshot_time=time,
        source_id=_typed(obj, "source_id", (str,), w),
        server_id=_typed(obj, "server_id", (int,), w, optional=True),
        server_uuid=_typed(obj, "server_uuid", (str,), w, optional=True),
        server_version=_typed(obj, "server_version", (str,), w, optional=True),
        binlog_file=bfile, binlog_pos=_typed(obj, "binlog_pos", (int,), w, optional=True),
        gtid_executed=_typed(obj, "gtid_executed", (str,), w, optional=True),
        tables=tables, fks=fks)


def check_to_json(c: SourceCheck) -> dict[str, str]:
    return {"level": c.level, "name": c.name, "detail": c.detail}


def check_from_json(obj: Any, where: str = "check") -> SourceCheck:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object")
    level = _typed(obj, "level", (str,), where)
    if level not in CHECK_LEVELS:
        raise ValueError(f"{where}: level must be one of {CHECK_LEVELS}, got {level!r}")
    return SourceCheck(level, _typed(obj, "name", (str,), where), _typed(obj, "detail", (str,), where))
