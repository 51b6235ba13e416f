"""Read a schema snapshot and the source checks from a live MySQL/MariaDB server (pymysql).

One consistent moment
---------------------
information_schema is not transactional, and FLUSH TABLES WITH READ LOCK would stall the
server, so the read is *bracketed* by binlog coordinates instead:

1. read the coordinates C1 (``SHOW MASTER STATUS`` — ``SHOW BINARY LOG STATUS`` on MySQL
   8.2+ — plus the executed GTID set: MySQL's ``Executed_Gtid_Set`` column of the same
   statement, MariaDB's ``BINLOG_GTID_POS(file, pos)``, the GTID position at exactly that
   offset);
2. read COLUMNS, the PRIMARY KEY columns, MariaDB's ``json_valid`` CHECKs and the foreign keys;
3. read the coordinates C2.

If C1 == C2 nothing was written to the binlog during the read, so the schema read is the
schema at C1. If they differ, the events between C1 and C2 are listed (``SHOW BINLOG EVENTS``);
when none of them is a statement other than BEGIN/COMMIT/ROLLBACK/SAVEPOINT/XA (i.e. no DDL),
the schema did not change inside [C1, C2] and C1 is used. Otherwise (or when the events cannot
be listed) the whole read is retried, up to ``attempts`` times, then :class:`SourceError`.
This is sound because a DDL statement writes its binlog event while still holding the
exclusive metadata lock on its table, and information_schema reads a table's definition under
a shared lock: a definition a DDL produced is never visible before that DDL's event is in the
binlog, so any DDL the read saw lies in [C1, C2].

The checks of the server and the schema it reads: :mod:`pipelines.source.checks`.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Sequence

from pipelines.mysql.client import connect
from pipelines.mysql.dsn import Dsn, error_text
from pipelines.errors import SourceError
from pipelines.source.checks import schema_checks, server_checks
from pipelines.source.model import ColumnSchema, ForeignKey, Snapshot, SourceCheck, TableSchema

__all__ = ["take_snapshot", "Coordinates", "SYSTEM_SCHEMAS", "new_snapshot_id", "is_ddl_event"]

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")
_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
              "binlog_row_value_options", "server_id", "server_uuid", "version",
              "innodb_native_foreign_keys", "gtid_mode")
_JSON_VALID = re.compile(r"^\s*json_valid\s*\(\s*(`(?:[^`]|``)+`|\w+)\s*\)\s*$", re.I)
_NOT_DDL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE\s+SAVEPOINT|XA\s)", re.I)
_USE_PREFIX = re.compile(r"^\s*use\s+`(?:[^`]|``)*`\s*;\s*", re.I)


@dataclass(frozen=True)
class Coordinates:
    """Where the server's binlog ends: file, position, executed GTID set."""

    binlog_file: str | None
    binlog_pos: int | None
    gtid_executed: str | None


@dataclass(frozen=True)
class _Server:
    version: str
    is_mariadb: bool
    variables: dict[str, str]

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        m = re.match(r"(\d+)\.(\d+)\.(\d+)", self.version)
        return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def new_snapshot_id(at: dt.datetime) -> str:
    """``20240501T120000Z-1a2b3c4d``: sortable by time, unique by its random suffix."""
    return f"{at:%Y%m%dT%H%M%S}Z-{secrets.token_hex(4)}"


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else value


# -- reads -----------------------------------------------------------------------------------

def _query(cur, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    cur.execute(sql, params)
    return [tuple(_text(v) for v in row) for row in cur.fetchall()]


def _server(cur) -> _Server:
    placeholders = ", ".join(["%s"] * len(_VARIABLES))
    rows = _query(cur, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})",
                  list(_VARIABLES))
    variables = {str(k).lower(): str(v) for k, v in rows}
    version = _query(cur, "SELECT VERSION()")[0][0]
    return _Server(str(version), "mariadb" in str(version).lower(), variables)


def _status(cur, server: _Server) -> tuple[str | None, int | None, str | None]:
    new_syntax = not server.is_mariadb and server.version_tuple >= (8, 2, 0)
    statements = (["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"] if new_syntax
                  else ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"])
    import pymysql

    for i, sql in enumerate(statements):
        try:
            cur.execute(sql)
        except pymysql.err.ProgrammingError:
            if i == len(statements) - 1:
                raise
            continue
        names = [d[0].lower() for d in cur.description or ()]
        row = cur.fetchone()
        if row is None:
            return None, None, None  # binary log off
        rec = dict(zip(names, (_text(v) for v in row)))
        gtid = rec.get("executed_gtid_set")
        return rec.get("file"), int(rec["position"]), (gtid.replace("\n", "") if gtid else gtid)
    raise AssertionError("unreachable")


def _coordinates(cur, server: _Server) -> Coordinates:
    first = _status(cur, server)
    if not server.is_mariadb or first[0] is None:
        return Coordinates(*first)
    # MariaDB: BINLOG_GTID_POS(file, pos) is the GTID position at exactly that offset, so the
    # file/pos and the GTID set cannot come from different moments.
    import pymysql

    try:
        gtid = _query(cur, "SELECT BINLOG_GTID_POS(%s, %s)", (first[0], first[1]))[0][0]
        if gtid is not None:
            return Coordinates(first[0], first[1], str(gtid))
    except pymysql.err.MySQLError:  # BINLOG_GTID_POS needs MariaDB 10.0+ and the file
        pass
    for _ in range(50):
        gtid = _query(cur, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
        second = _status(cur, server)
        if first == second:
            return Coordinates(first[0], first[1], str(gtid) if gtid is not None else None)
        first = second
    raise SourceError("binlog position kept moving while reading the GTID position")


def _in_schemas(schemas: Sequence[str] | None, column: str) -> tuple[str, list[str]]:
    names = list(schemas) if schemas else list(SYSTEM_SCHEMAS)
    placeholders = ", ".join(["%s"] * len(names))
    op = "IN" if schemas else "NOT IN"
    return f"{column} {op} ({placeholders})", names


def _read_schema(cur, server: _Server, schemas: Sequence[str] | None
                 ) -> tuple[dict[tuple[str, str], TableSchema], list[ForeignKey]]:
    where, params = _in_schemas(schemas, "c.TABLE_SCHEMA")
    cols = _query(cur, (
        "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.ORDINAL_POSITION, c.COLUMN_KEY, "
        "c.DATA_TYPE, c.COLUMN_TYPE, c.CHARACTER_SET_NAME, c.COLLATION_NAME, c.IS_NULLABLE, "
        "c.COLUMN_DEFAULT, c.EXTRA "
        "FROM information_schema.COLUMNS c JOIN information_schema.TABLES t "
        "ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
        f"WHERE t.TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') AND {where} "
        "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"), params)
    where_s, params_s = _in_schemas(schemas, "s.TABLE_SCHEMA")
    pk = {(s, t, c): int(seq) for s, t, c, seq in _query(cur, (
        "SELECT s.TABLE_SCHEMA, s.TABLE_NAME, s.COLUMN_NAME, s.SEQ_IN_INDEX "
        f"FROM information_schema.STATISTICS s WHERE s.INDEX_NAME = 'PRIMARY' AND {where_s}"),
        params_s)}
    json_cols = _mariadb_json_columns(cur, schemas) if server.is_mariadb else set()
    by_table: dict[tuple[str, str], list[ColumnSchema]] = {}
    for (schema, table, name, ordinal, key, data_type, column_type, charset, collation,
         nullable, default, extra) in cols:
        extra_u = str(extra or "")
        data_type = str(data_type).lower()
        by_table.setdefault((schema, table), []).append(ColumnSchema(
            name=name, ordinal=int(ordinal), data_type=data_type, column_type=str(column_type),
            charset=charset, collation=collation, nullable=str(nullable).upper() == "YES",
            default=None if default is None else str(default),
            generated=_is_generated(extra_u),
            is_json=data_type == "json" or (schema, table, name) in json_cols,
            pk_ordinal=pk.get((schema, table, name)), column_key=str(key or "")))
    tables = {k: TableSchema(k[0], k[1], v) for k, v in by_table.items()}
    where_k, params_k = _in_schemas(schemas, "k.TABLE_SCHEMA")
    fk_rows = _query(cur, (
        "SELECT k.CONSTRAINT_SCHEMA, k.CONSTRAINT_NAME, k.TABLE_SCHEMA, k.TABLE_NAME, "
        "k.COLUMN_NAME, k.ORDINAL_POSITION, k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, "
        "k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE "
        "FROM information_schema.KEY_COLUMN_USAGE k "
        "JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
        "ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME "
        "AND r.TABLE_NAME = k.TABLE_NAME "
        f"WHERE k.REFERENCED_TABLE_NAME IS NOT NULL AND {where_k} "
        "ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION"),
        params_k)
    fks = [ForeignKey(cs, cn, ts, tn, col, int(pos), rs, rt, rc, str(upd), str(dele))
           for cs, cn, ts, tn, col, pos, rs, rt, rc, upd, dele in fk_rows]
    return tables, fks


def _is_generated(extra: str) -> bool:
    """EXTRA says ``VIRTUAL GENERATED`` / ``STORED GENERATED`` (MySQL 5.7+, MariaDB 10.2+) or
    ``VIRTUAL`` / ``PERSISTENT`` (older MariaDB)."""
    words = extra.upper().split()
    return "GENERATED" in words or bool(words) and words[0] in ("VIRTUAL", "PERSISTENT", "STORED")


def _mariadb_json_columns(cur, schemas: Sequence[str] | None) -> set[tuple[str, str, str]]:
    """MariaDB's JSON is LONGTEXT + ``CHECK (json_valid(col))``: the columns so checked."""
    import pymysql

    where, params = _in_schemas(schemas, "CONSTRAINT_SCHEMA")
    try:
        rows = _query(cur, "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE "
                           f"FROM information_schema.CHECK_CONSTRAINTS WHERE {where}", params)
    except pymysql.err.MySQLError:  # MariaDB < 10.2.22 has no CHECK_CONSTRAINTS
        return set()
    out = set()
    for schema, table, clause in rows:
        m = _JSON_VALID.match(str(clause))
        if m:
            name = m.group(1)
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            out.add((schema, table, name))
    return out


def is_ddl_event(event_type: str, info: str) -> bool:
    """True for a binlog event that may change a schema (a QUERY other than BEGIN/COMMIT/...)."""
    if event_type.lower() != "query":
        return False
    return not _NOT_DDL.match(_USE_PREFIX.sub("", info or "", count=1))


def _ddl_between(cur, a: Coordinates, b: Coordinates) -> bool | None:
    """Whether a DDL-like event lies in [a, b); None when the events cannot be listed."""
    import pymysql

    if a.binlog_file is None or b.binlog_file is None:
        return None
    try:
        files = [str(r[0]) for r in _query(cur, "SHOW BINARY LOGS")]
        if a.binlog_file not in files or b.binlog_file not in files:
            return None
        for name in files[files.index(a.binlog_file): files.index(b.binlog_file) + 1]:
            start = a.binlog_pos if name == a.binlog_file else 4
            cur.execute("SHOW BINLOG EVENTS IN %s FROM %s", (name, start))
            for row in cur.fetchall():
                _log, pos, etype, _sid, _end, info = (_text(v) for v in row[:6])
                if name == b.binlog_file and int(pos) >= (b.binlog_pos or 0):
                    break
                if is_ddl_event(str(etype), str(info)):
                    return True
    except pymysql.err.MySQLError:  # no REPLICATION SLAVE / BINLOG MONITOR privilege
        return None
    return False


# -- checks ----------------------------------------------------------------------------------

def take_snapshot(dsn: Dsn, *, source_id: str, schemas: Sequence[str] | None = None,
                  attempts: int = 5) -> tuple[Snapshot, list[SourceCheck]]:
    """Read every base table of ``schemas`` (default: all but the system schemas) at one
    binlog position, and judge the server's settings (module docstring).

    Raises :class:`SourceError` (naming host:port, never the password) when the server cannot
    be reached or read, or when DDL kept moving the schema for ``attempts`` reads.
    """
    import pymysql

    conn = connect(dsn, section="source", read_timeout=300)
    try:
        with conn.cursor() as cur:
            server = _server(cur)
            for attempt in range(attempts):
                before = _coordinates(cur, server)
                at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
                tables, fks = _read_schema(cur, server, schemas)
                after = _coordinates(cur, server)
                if before == after or _ddl_between(cur, before, after) is False:
                    break
                time.sleep(min(0.05 * 2 ** attempt, 1.0))
            else:
                raise SourceError(f"{dsn.host}:{dsn.port}: the binlog kept moving across "
                                  f"schema changes during {attempts} snapshot reads; retry "
                                  "when DDL is quiet")
    except pymysql.err.MySQLError as exc:
        raise SourceError(f"{dsn.host}:{dsn.port}: reading the schema failed: "
                          f"{error_text(exc, dsn)}") from None
    finally:
        conn.close()
    server_id = server.variables.get("server_id")
    snapshot = Snapshot(
        snapshot_id=new_snapshot_id(at), snapshot_time=at, source_id=source_id,
        server_id=int(server_id) if server_id not in (None, "") else None,
        server_uuid=server.variables.get("server_uuid") or None,
        server_version=server.version, binlog_file=before.binlog_file,
        binlog_pos=before.binlog_pos, gtid_executed=before.gtid_executed or None,
        tables=tables, fks=fks)
    return snapshot, server_checks(server.variables) + schema_checks(snapshot, server.variables)
