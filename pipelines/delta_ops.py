"""The few Delta operations that differ per engine, in one place.

Reads and writes go through ``format("delta")`` and SQL on every engine. What Sail 0.7 cannot
do (DESCRIBE HISTORY, VACUUM, table properties) goes through ``deltalake`` (delta-rs) on the
same files when the table is on a local or object-store path; on a JVM Spark with delta-spark
the SQL forms are used.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

from pipelines.errors import EngineError

__all__ = ["table_exists", "sql_string", "delete_where", "history", "current_version",
           "rows_written_since",
           "table_id", "files_added", "set_retention", "vacuum_table"]


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


def rows_written_since(path: str, version: int | None) -> int | None:
    """Rows added by the commits after ``version`` (``None`` = from the start), from the Delta
    log's ``numOutputRows`` metrics (delta-rs); ``None`` when a commit lacks them."""
    try:
        from deltalake import DeltaTable

        commits = DeltaTable(path).history()
    except Exception:  # noqa: BLE001 - no table yet, or not readable by delta-rs
        return None
    total = 0
    for c in commits:
        if version is not None and c.get("version", -1) <= version:
            continue
        rows = (c.get("operationMetrics") or {}).get("numOutputRows")
        if rows is None:
            return None
        total += int(rows)
    return total


def table_id(path: str) -> str | None:
    """The Delta table's metadata id (a UUID fixed at creation), ``None`` when unreadable."""
    try:
        from deltalake import DeltaTable

        return DeltaTable(path).metadata().id
    except Exception:  # noqa: BLE001 - not found / no deltalake / remote store without creds
        return None


def files_added(path: str, since_version: int, to_version: int) -> list[str] | None:
    """Data files holding exactly the rows appended after ``since_version`` up to
    ``to_version`` (absolute URIs), for an append-only table.

    Files an OPTIMIZE wrote (``dataChange=false``: the same rows rearranged) do not count; a
    file appended in between and then rewritten by an OPTIMIZE is returned as appended (it
    stays on disk until VACUUM). ``None`` when a version cannot be loaded (log cleaned up,
    table re-created, store unreadable by delta-rs) or such a file was vacuumed: the caller
    then reads the whole snapshot.
    """
    try:
        from deltalake import DeltaTable

        # The latest table's history: delta-rs 1.6 numbers the history of a table loaded
        # at an older version off by one.
        ops = {c.get("version"): str(c.get("operation", "")).upper()
               for c in DeltaTable(path).history()}
        if not any(ops.get(v) in _REWRITES for v in range(since_version + 1, to_version + 1)):
            old = set(DeltaTable(path, version=since_version).file_uris())
            new = DeltaTable(path, version=to_version).file_uris()
            return [f for f in new if f not in old]
        out: list[str] = []
        prev = set(DeltaTable(path, version=since_version).file_uris())
        for v in range(since_version + 1, to_version + 1):
            files = DeltaTable(path, version=v).file_uris()
            if ops.get(v) not in _REWRITES:
                out += [f for f in files if f not in prev]
            prev = set(files)
    except Exception:  # noqa: BLE001 - delta-rs raises several kinds
        return None
    if any(f.startswith("file://") and not os.path.exists(unquote(f[len("file://"):]))
           or f.startswith("/") and not os.path.exists(f) for f in out):
        return None
    return out


# Commits that rewrite files without changing rows (``dataChange=false``).
_REWRITES = ("OPTIMIZE", "REORG")


def set_retention(path: str, *, log_retention: str, deleted_file_retention: str) -> dict[str, str]:
    """Set ``delta.logRetentionDuration`` / ``delta.deletedFileRetentionDuration`` (delta-rs:
    Sail 0.7 has no ALTER TABLE … SET TBLPROPERTIES); return the table's properties after."""
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise EngineError("table properties on this engine need the deltalake package") from exc
    dt = DeltaTable(path)
    want = {"delta.logRetentionDuration": log_retention,
            "delta.deletedFileRetentionDuration": deleted_file_retention}
    have = dt.metadata().configuration or {}
    if any(have.get(k) != v for k, v in want.items()):
        dt.alter.set_table_properties(want)
        dt = DeltaTable(path)
    return dict(dt.metadata().configuration or {})


def vacuum_table(path: str, *, dry_run: bool = False) -> dict[str, Any]:
    """VACUUM by the table's own ``delta.deletedFileRetentionDuration`` (delta-rs, retention
    enforced), then drop log entries older than ``delta.logRetentionDuration`` (checkpoint
    first so every kept version stays readable). Returns the files removed (or to remove)
    and the table version."""
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise EngineError("VACUUM on this engine needs the deltalake package") from exc
    dt = DeltaTable(path)
    removed = dt.vacuum(dry_run=dry_run, enforce_retention_duration=True)
    if not dry_run:
        dt = DeltaTable(path)
        dt.create_checkpoint()
        dt.cleanup_metadata()
    return {"files": list(removed), "version": dt.version()}


def target_file_size(mb: int) -> dict[str, str]:
    """Write options rolling a data file over at about ``mb`` MB (Sail: ``targetFileSize``;
    JVM Spark ignores it and writes one file per task, as before)."""
    return {"targetFileSize": str(mb << 20)} if mb > 0 else {}
