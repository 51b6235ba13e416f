"""The few Delta operations that differ per engine, in one place.

Reads and writes go through ``format("delta")`` and SQL on every engine. What Sail 0.7 cannot
do (DESCRIBE HISTORY, VACUUM, table properties) goes through ``deltalake`` (delta-rs) on the
same files when the table is on a local or object-store path; on a JVM Spark with delta-spark
the SQL forms are used.
"""

from __future__ import annotations

from typing import Any

from pipelines.errors import EngineError

__all__ = ["table_exists", "sql_string", "delete_where", "history", "current_version"]


def sql_string(value: str) -> str:
    """A SQL string literal for ``value`` (single quotes doubled, backslashes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ident_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def table_exists(spark, path: str) -> bool:
    """True when a Delta table exists at ``path``."""
    try:
        spark.read.format("delta").load(path).schema  # noqa: B018 - forces analysis
        return True
    except Exception:  # noqa: BLE001 - engines raise different AnalysisException types
        return False


def delete_where(spark, path: str, predicate: str) -> None:
    """``DELETE FROM`` the table at ``path`` where ``predicate`` (SQL) holds.

    Used with predicates on partition columns only, which every engine turns into a
    metadata-only commit (Sail 0.7 cannot rewrite files holding arrays, see docs/bronze.md).
    """
    spark.sql(f"DELETE FROM {_ident_path(path)} WHERE {predicate}").collect()


def history(spark, path: str, engine: str) -> list[dict[str, Any]]:
    """The table's commit history, newest first (version, timestamp, operation)."""
    if engine in ("spark", "active"):
        try:
            rows = spark.sql(f"DESCRIBE HISTORY {_ident_path(path)}").collect()
            return [{"version": r["version"], "timestamp": str(r["timestamp"]),
                     "operation": r["operation"]} for r in rows]
        except Exception:  # noqa: BLE001 - fall through to delta-rs
            pass
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise EngineError("reading Delta history on this engine needs the deltalake package") from exc
    return [{"version": h.get("version"), "timestamp": h.get("timestamp"),
             "operation": h.get("operation")} for h in DeltaTable(path).history()]


def current_version(path: str) -> int | None:
    """The table's latest version (delta-rs), ``None`` when there is no table."""
    try:
        from deltalake import DeltaTable

        return DeltaTable(path).version()
    except Exception:  # noqa: BLE001 - TableNotFoundError and friends
        return None
