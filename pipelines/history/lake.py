"""I/O: the lake tables the history commands read, and the column specs of selected changes.

:func:`with_specs` joins selected silver rows to their bronze rows (the TABLE_MAP facts) and
resolves each with the same :class:`~pipelines.silver.naming.NamingPlan` silver used, so a
value is turned into a SQL literal with exactly the column types it was rendered with.
"""

from __future__ import annotations

from typing import Any

from pipelines.config import Config
from pipelines.lake.delta_ops import sql_string
from pipelines.errors import ConfigError, SchemaMismatchError
from pipelines.history.derived_spec import Lookups, derived_spec
from pipelines.silver.naming import TABLE_MAP_COLUMNS, BronzeTableMap, NamingPlan, TableSpec
from pipelines.vocabulary import ROW_KEY

__all__ = ["silver", "bronze", "naming_plan", "with_specs", "KEY", "TM_COLUMNS"]

KEY = list(ROW_KEY)
TM_COLUMNS = [*TABLE_MAP_COLUMNS, "trx_pos"]


def silver(spark, cfg: Config):
    """Silver's row changes; :class:`ConfigError` when the lake has none yet."""
    from pipelines.lake.tables import SILVER_EVENTS, Lake

    lk = Lake.of(cfg)
    if not lk.exists(spark, SILVER_EVENTS):
        raise ConfigError(f"no silver table at {lk.where(SILVER_EVENTS)}: index binlogs first "
                          "(binlake index --binlog-dir DIR --all)")
    return lk.read(spark, SILVER_EVENTS)


def bronze(spark, cfg: Config):
    from pipelines.lake.tables import BRONZE_EVENTS, Lake

    lk = Lake.of(cfg)
    if not lk.exists(spark, BRONZE_EVENTS):
        raise ConfigError(f"no bronze table at {lk.where(BRONZE_EVENTS)}: index binlogs first")
    return lk.read(spark, BRONZE_EVENTS)


def naming_plan(spark, cfg: Config) -> NamingPlan:
    """The plan silver names rows with (bronze DDL positions + stored snapshots)."""
    from pipelines.silver.snapshot_store import load_snapshots

    ddl_rows = [(r[0], r[1], r[2], r[3], r[4]) for r in bronze(spark, cfg)
                .where("event_type = 'QUERY'")
                .select("source_id", "binlog_file", "start_pos", "schema_name", "query")
                .collect()]
    return NamingPlan.build(ddl_rows, load_snapshots(spark, cfg))


def with_specs(spark, cfg: Config, rows_df, plan: NamingPlan | None = None
               ) -> list[tuple[dict[str, Any], TableSpec]]:
    """Collect ``rows_df`` (silver rows) with each row's :class:`TableSpec`, in seq order.

    Raises :class:`SchemaMismatchError` naming the change when its bronze row is gone.
    """
    files = [r[0] for r in rows_df.select("binlog_file").distinct().collect()]
    if not files:
        return []
    in_files = "binlog_file IN (" + ", ".join(sql_string(f) for f in files) + ")"
    b = bronze(spark, cfg).where(in_files).select(*KEY, *TM_COLUMNS, "table_map_hash")
    joined = rows_df.join(b, KEY, "left").orderBy("seq").collect()
    plan = plan or naming_plan(spark, cfg)
    maps = None
    out = []
    derived: dict = {}  # a derived change's spec per table and epoch
    look = _lookups(spark, cfg, plan)  # what derived_spec reads of the lake, built once
    for r in joined:
        d = r.asDict()
        if d["column_types"] is None and d["table_map_hash"] is not None:
            if maps is None:  # bronze's TABLE_MAP rows (docs/bronze.md)
                from pipelines.bronze.table_maps import read_table_maps
                from pipelines.lake.tables import Lake

                maps = read_table_maps(spark, Lake.of(cfg), in_files)
            d.update(maps.get(d["table_map_hash"], {}))
        if d["column_types"] is None and (d.get("origin") or "binlog") != "binlog":
            out.append((d, derived_spec(look, plan, d, derived)))
            continue
        if d["column_types"] is None:
            raise SchemaMismatchError(f"{d['binlog_file']} pos {d['start_pos']}: the change's "
                                      "bronze row is missing (bronze rebuilt without it?)")
        spec = plan.resolve(d["source_id"], d["schema_name"], d["table_name"], d["binlog_file"],
                            d["start_pos"], BronzeTableMap.of(d))
        out.append((d, spec))
    return out


def _lookups(spark, cfg: Config, plan: NamingPlan) -> Lookups:
    """What ``derived_spec`` reads of the lake (a derived row has no bronze row)."""
    from pipelines.lake.tables import Lake
    from pipelines.silver.renames import load_renames

    return Lookups(lambda: silver(spark, cfg), lambda df: with_specs(spark, cfg, df, plan),
                   lambda schema, table: ddl_statements(spark, cfg, schema, table),
                   lambda: load_renames(spark, Lake.of(cfg)))


def ddl_events(spark, cfg: Config, schema: str, table: str) -> list[tuple[int, str, str]]:
    """(position key, 'CREATE'|'DROP'|'OTHER', 'file:pos') of the DDL touching the table,
    in binlog order."""
    return [(d["key"], d["kind"], d["where"]) for d in ddl_statements(spark, cfg, schema, table)]


def ddl_statements(spark, cfg: Config, schema: str, table: str) -> list[dict[str, Any]]:
    """The DDL touching the table in binlog order: ``key`` (position key), ``kind``
    ('CREATE'|'DROP'|'OTHER'), ``where`` ('file:pos'), ``query``, ``event_timestamp``."""
    import re

    from pipelines.silver.ddl import DROP_DATABASE, tables_touched
    from pipelines.silver.naming import position_key

    out = []
    rows = (bronze(spark, cfg).where("event_type = 'QUERY'")
            .select("binlog_file", "start_pos", "schema_name", "query", "event_timestamp")
            .collect())
    for r in rows:
        touched = tables_touched(r["query"] or "", r["schema_name"])
        if (schema, table) in touched or (schema, DROP_DATABASE) in touched:
            q = re.sub(r"^\s*(/\*.*?\*/\s*)*", "", r["query"] or "", flags=re.S).upper()
            kind = ("CREATE" if q.startswith("CREATE") else
                    "DROP" if q.startswith("DROP") else "OTHER")
            out.append({"key": position_key(r["binlog_file"], r["start_pos"]), "kind": kind,
                        "where": f"{r['binlog_file']}:{r['start_pos']}", "query": r["query"],
                        "event_timestamp": r["event_timestamp"]})
    return sorted(out, key=lambda d: d["key"])


def starts_at_creation(spark, cfg: Config, schema: str, table: str) -> bool:
    """True when bronze holds the table's CREATE TABLE (silver then has all its rows)."""
    return any(kind == "CREATE" for _, kind, _ in ddl_events(spark, cfg, schema, table))


def quarantined(spark, cfg: Config, schema: str, table: str, start: int = -1,
                end: int = (1 << 63) - 1) -> list[dict]:
    """The table's quarantined changes with start <= position < end (silver lacks them)."""
    from pipelines.lake.tables import SILVER_QUARANTINE, Lake
    from pipelines.silver.naming import position_key

    lk = Lake.of(cfg)
    if not lk.exists(spark, SILVER_QUARANTINE):
        return []
    rows = (lk.read(spark, SILVER_QUARANTINE)
            .where(f"schema_name = {sql_string(schema)} AND table_name = {sql_string(table)}")
            .select("binlog_file", "start_pos", "reason").collect())
    return [r.asDict() for r in rows
            if start <= position_key(r["binlog_file"], r["start_pos"]) < end]
