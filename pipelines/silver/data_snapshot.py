"""``binlake snapshot --data``: a consistent copy of the tables' rows, with its binlog
coordinates, as the baseline ``binlake reconstruct`` replays silver from.

One read transaction on the source (``START TRANSACTION WITH CONSISTENT SNAPSHOT``). MariaDB
reports the binlog position of exactly that snapshot (status ``binlog_snapshot_file`` /
``binlog_snapshot_position``; GTID by ``BINLOG_GTID_POS``); MySQL needs a brief ``FLUSH
TABLES WITH READ LOCK`` around the start (as mysqldump does; needs RELOAD). The schema read in
the same transaction is stored as a schema snapshot at those coordinates.

Rows are selected in bronze's value forms (numbers as text, ``+0`` for BIT/ENUM/SET/YEAR,
bytes for strings) and rendered by silver's own renderer (:mod:`pipelines.silver.images`), so a
baseline image equals the image silver would have written for the same row. Tables:

Both tables are declared in ``pipelines/lake/tables.py`` (``BASELINE_ROWS``, ``BASELINES``):

- ``<lake>/silver/baseline_rows``: snapshot_id, source_id, schema_name, table_name,
  pk_values, pk_hash, row_image (appended per batch of ``batch_rows``: memory stays bounded);
- ``<lake>/silver/baselines``: one row per table once all its rows are stored (snapshot_id,
  snapshot_time, source_id, binlog_file, binlog_pos, gtid_executed, seq, schema_name,
  table_name, row_count). Only baselines listed here are used: an interrupted run is ignored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

from pipelines.binlog import coltypes as T
from pipelines.binlog.values import float32_text
from pipelines.config import ARROW_BATCH_ROWS, Config
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import SchemaMismatchError, SourceError
from pipelines.lake.tables import BASELINE_ROWS, BASELINES, Lake
from pipelines.silver.images import TableRenderer
from pipelines.silver.naming import TableSpec
from pipelines.silver.render import ColumnSpec
from pipelines.source.model import ColumnSchema, Snapshot, TableSchema
from pipelines.mysql.client import connect
from pipelines.mysql.dsn import Dsn, error_text
from pipelines.source.checks import refusals, schema_checks, server_checks
from pipelines.source.schema import _coordinates, _read_schema, _server, new_snapshot_id
from pipelines.vocabulary import INSERT, quote_ident

__all__ = ["BASELINE_ROWS_DDL", "BASELINES_DDL", "column_spec", "table_spec",
           "take_data_snapshot", "DataSnapshotResult", "load_baselines"]

BASELINE_ROWS_DDL = BASELINE_ROWS.ddl()
BASELINES_DDL = BASELINES.ddl()

_INTS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_GEOMETRY = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection"}
_TYPES = {"float": T.FLOAT, "double": T.DOUBLE, "real": T.DOUBLE, "decimal": T.NEWDECIMAL,
          "numeric": T.NEWDECIMAL, "bit": T.BIT, "year": T.YEAR, "date": T.DATE,
          "time": T.TIME2, "datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2,
          "enum": T.ENUM, "set": T.SET, "json": T.JSON, "vector": T.VECTOR}


def column_spec(col: ColumnSchema) -> ColumnSpec:
    """How silver renders ``col``'s values when they come from a SELECT (see :func:`_expr`)."""
    t = col.data_type.lower()
    if t in _INTS:
        return ColumnSpec(col.name, T.LONGLONG)
    if t in _GEOMETRY:
        return ColumnSpec(col.name, T.GEOMETRY, charset="binary")
    if t in _BYTES:
        return ColumnSpec(col.name, T.BLOB, charset="binary")
    if t in _TYPES:
        return ColumnSpec(col.name, _TYPES[t], enum_values=_tuple(col.enum_values),
                          set_values=_tuple(col.set_values))
    return ColumnSpec(col.name, T.VARCHAR, charset=col.charset or "binary",
                      is_json=col.is_json)


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return tuple(values) if values is not None else None


def table_spec(ts: TableSchema, version: str) -> TableSpec:
    specs = tuple(column_spec(c) for c in ts.columns)
    pk = tuple(i for i, c in enumerate(ts.columns) if c.pk_ordinal is not None)
    return TableSpec(specs, pk or tuple(range(len(specs))), ts.pk_kind, version)


def _expr(col: ColumnSchema) -> str:
    """The SELECT expression giving the column's value in bronze's form."""
    t, name = col.data_type.lower(), quote_ident(col.name)
    if t in ("bit", "year", "enum", "set"):
        return f"{name} + 0"
    if t == "float":
        return f"CAST({name} AS DOUBLE)"
    if t == "double" or t == "real":
        return name
    if t in _INTS or t in ("decimal", "numeric", "date", "time", "datetime", "timestamp",
                           "json"):
        return f"CAST({name} AS CHAR)"
    return f"CAST({name} AS BINARY)"


def _bronze_value(col: ColumnSchema, value: Any) -> bytes | None:
    if value is None:
        return None
    t = col.data_type.lower()
    if t == "float":
        return float32_text(float(value)).encode("ascii")
    if t in ("double", "real"):
        return repr(float(value)).encode("ascii")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode("utf-8")


@dataclass
class DataSnapshotResult:
    snapshot: Snapshot
    rows: dict[tuple[str, str], int] = field(default_factory=dict)


def _begin(cur, server) -> tuple[str | None, int | None, str | None]:
    """Start the consistent read; return its binlog coordinates."""
    if server.is_mariadb:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW STATUS WHERE Variable_name IN "
                    "('binlog_snapshot_file', 'binlog_snapshot_position')")
        status = {str(k).lower(): v for k, v in cur.fetchall()}
        f = status.get("binlog_snapshot_file")
        f = f.decode() if isinstance(f, bytes) else f
        pos = int(status.get("binlog_snapshot_position") or 0)
        if not f:
            raise SourceError("the source's binary log is off: a baseline needs its "
                              "coordinates")
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (f, pos))
        gtid = cur.fetchone()[0]
        return f, pos, gtid.decode() if isinstance(gtid, bytes) else gtid
    cur.execute("FLUSH TABLES WITH READ LOCK")
    try:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        c = _coordinates(cur, server)
    finally:
        cur.execute("UNLOCK TABLES")
    if c.binlog_file is None:
        raise SourceError("the source's binary log is off: a baseline needs its coordinates")
    return c.binlog_file, c.binlog_pos, c.gtid_executed


def take_data_snapshot(spark, cfg: Config, dsn: Dsn, *, schemas: Sequence[str] | None = None,
                       batch_rows: int = ARROW_BATCH_ROWS) -> DataSnapshotResult:
    """Copy every base table of ``schemas`` at one binlog position into the lake.

    Raises :class:`SourceError` (host:port, never the password) when the source cannot be
    read or a source check refuses it (nothing is then listed in ``silver/baselines``).
    """
    import pymysql

    from pipelines.silver.snapshot_store import save_snapshot

    conn = connect(dsn, section="source", read_timeout=300)
    result = None
    try:
        with conn.cursor() as cur:
            server = _server(cur)
            cur.execute("SET SESSION time_zone = '+00:00'")
            at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
            binlog_file, binlog_pos, gtid = _begin(cur, server)
            tables, fks = _read_schema(cur, server, schemas)
        server_id = server.variables.get("server_id")
        snapshot = Snapshot(
            snapshot_id=new_snapshot_id(at), snapshot_time=at, source_id=cfg.source.name,
            server_id=int(server_id) if server_id not in (None, "") else None,
            server_uuid=server.variables.get("server_uuid") or None,
            server_version=server.version, binlog_file=binlog_file, binlog_pos=binlog_pos,
            gtid_executed=gtid or None, tables=tables, fks=fks)
        checks = server_checks(server.variables) + schema_checks(snapshot, server.variables)
        refused = refusals(checks)
        if refused:
            raise SourceError("refusing the source, nothing stored: " + "; ".join(
                f"{c.name}: {c.detail}" for c in refused))
        result = DataSnapshotResult(snapshot)
        for key in sorted(tables):
            result.rows[key] = _copy_table(spark, cfg, conn, snapshot, tables[key], batch_rows)
        conn.commit()
    except pymysql.err.MySQLError as exc:
        raise SourceError(f"{dsn.host}:{dsn.port}: reading the data snapshot failed: "
                          f"{error_text(exc, dsn)}") from None
    finally:
        conn.close()
    save_snapshot(spark, cfg, snapshot, checks)
    _mark_complete(spark, cfg, result)
    return result


def _copy_table(spark, cfg: Config, conn, snapshot: Snapshot, ts: TableSchema,
                batch_rows: int) -> int:
    import pymysql.cursors

    spec = table_spec(ts, snapshot.snapshot_id)
    renderer = TableRenderer(spec)
    exprs = ", ".join(_expr(c) for c in ts.columns)
    lk = Lake.of(cfg)
    n = 0
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT {exprs} FROM {quote_ident(ts.schema)}.{quote_ident(ts.table)}")
        while True:
            rows = cur.fetchmany(batch_rows)
            if not rows:
                break
            images = _render_inserts(renderer, [[_bronze_value(c, v) for c, v in
                                                  zip(ts.columns, r)] for r in rows])
            out = [(snapshot.snapshot_id, snapshot.source_id, ts.schema, ts.table, pk,
                    hashlib.sha256(pk.encode()).hexdigest(), after)
                   for pk, after in zip(images.pk_values.to_pylist(),
                                        images.row_after.to_pylist())]
            lk.append(spark.createDataFrame(out, BASELINE_ROWS_DDL), BASELINE_ROWS)
            n += len(out)
    return n


def _render_inserts(renderer: TableRenderer, images: list[list[bytes | None]]):
    """Render rows as INSERT after images (columnar); the first unrenderable row raises."""
    import pyarrow as pa

    m = len(images)
    out = renderer.render(pa.array([INSERT] * m), pa.nulls(m, pa.list_(pa.binary())),
                          pa.array(images, pa.list_(pa.binary())),
                          pa.nulls(m, pa.list_(pa.bool_())), pa.nulls(m, pa.list_(pa.bool_())))
    if out.errors:
        raise SchemaMismatchError(min(out.errors)[1])
    return out


def _mark_complete(spark, cfg: Config, res: DataSnapshotResult) -> None:
    s = res.snapshot
    rows = [(s.snapshot_id, s.snapshot_time, s.source_id, s.binlog_file, s.binlog_pos,
             s.gtid_executed, s.seq, schema, table, n) for (schema, table), n in res.rows.items()]
    if rows:
        Lake.of(cfg).append(spark.createDataFrame(rows, BASELINES_DDL), BASELINES)


def load_baselines(spark, cfg: Config, schema: str, table: str) -> list[dict[str, Any]]:
    """Complete baselines holding ``schema.table``, oldest coordinate first."""
    lk = Lake.of(cfg)
    if not lk.exists(spark, BASELINES):
        return []
    rows = (lk.read(spark, BASELINES)
            .where(f"schema_name = {sql_string(schema)} AND table_name = {sql_string(table)}")
            .collect())
    return sorted((r.asDict() for r in rows), key=lambda r: (r["seq"] or 0))
