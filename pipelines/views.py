"""Register the lake's Delta tables as temporary views for SQL (``binlake sql``, notebooks)."""

from __future__ import annotations

from pipelines.config import Config
from pipelines.delta_ops import table_exists

__all__ = ["LAKE_TABLES", "register_views"]

# view name → (layer, table directory)
LAKE_TABLES: dict[str, tuple[str, str]] = {
    "bronze_binlog_events": ("bronze", "binlog_events"),
    "bronze_files": ("bronze", "files"),
    "silver_binlog_events": ("silver", "binlog_events"),
    "quarantine": ("silver", "quarantine"),
    "schema_snapshots": ("silver", "schema_snapshots"),
    "fk_constraints": ("silver", "fk_constraints"),
    "source_checks": ("silver", "source_checks"),
    "quality_results": ("quality", "results"),
    "quality_failures": ("quality", "failures"),
}


def register_views(spark, cfg: Config) -> list[str]:
    """Create or replace a temp view per existing lake table; return the names registered.

    Time travel stays available through the path form: ``delta.`<path>` VERSION AS OF n``.
    """
    names = []
    for view, (layer, table) in LAKE_TABLES.items():
        path = cfg.table_path(layer, table)
        if table_exists(spark, path):
            spark.read.format("delta").load(path).createOrReplaceTempView(view)
            names.append(view)
    from pipelines.mirror.views import register_mirror_views
    names += register_mirror_views(spark, cfg)
    return names
