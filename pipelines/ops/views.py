"""Register the lake's Delta tables as temporary views for SQL (``binlake sql``, notebooks)."""

from __future__ import annotations

from pipelines.config import Config
from pipelines.lake.tables import BRONZE_EVENTS, BRONZE_FILES, Lake, lake_tables

__all__ = ["LAKE_TABLES", "TABLE_MAPS_VIEW", "register_views"]

# The distinct TABLE_MAP facts bronze's row changes name by table_map_hash (docs/bronze.md).
TABLE_MAPS_VIEW = "bronze_table_maps"

# view name → (layer, table directory): every registered table, by its catalog name and the
# older short names (``quarantine``, ``schema_snapshots``, …).
LAKE_TABLES: dict[str, tuple[str, str]] = {
    view: (t.layer, t.name) for t in lake_tables() for view in (t.table_name, *t.aliases)}


def register_views(spark, cfg: Config, *, global_views: bool = False) -> list[str]:
    """Create or replace a temp view per existing lake table (named as in the catalog, plus
    its older short names) and per mirror table; return the names registered.
    ``global_views``: global temp views, seen by every session as ``global_temp.<name>``.

    Time travel stays available through the table's identifier: ``delta.`<path>` VERSION AS
    OF n``, or ``cat.schema.silver_binlog_events VERSION AS OF n`` with ``lake.catalog``
    (the embedded engine reads only some older versions: ``delta_ops.UNREADABLE_VERSION``).
    """
    lake = Lake.of(cfg)
    names = []
    for table in lake_tables():
        if lake.exists(spark, table):
            df = lake.read(spark, table)
            if table.key == BRONZE_FILES.key:  # append-only: each file's latest row
                from pipelines.bronze.files import latest_states

                df = latest_states(df)
            views = [(view, df) for view in (table.table_name, *table.aliases)]
            if table.key == BRONZE_EVENTS.key:
                views.append((TABLE_MAPS_VIEW, _table_maps(df)))
            for view, frame in views:
                if global_views:
                    frame.createOrReplaceGlobalTempView(view)
                else:
                    frame.createOrReplaceTempView(view)
                names.append(view)
    from pipelines.mirror.views import register_mirror_views
    names += register_mirror_views(spark, cfg, global_views=global_views)
    return names


def _table_maps(bronze):
    from pipelines.bronze.records import TABLE_MAP_FIELDS

    return (bronze.where("event_type = 'TABLE_MAP'")
            .select("table_map_hash", "schema_name", "table_name", "column_count",
                    *TABLE_MAP_FIELDS)
            .dropDuplicates(["table_map_hash"]))
