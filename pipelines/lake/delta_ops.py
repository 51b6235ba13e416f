"""The few Delta operations that differ per engine, in one place.

Reads and writes go through ``format("delta")`` and SQL on every engine. What an engine can do
beyond that is asked, not assumed: :func:`capabilities` probes the session once (cached per
session) with Delta's own statements on a path that holds no table. delta-spark answers with a
Delta error (``[DELTA_MISSING_DELTA_TABLE]``…): the statement exists; Sail 0.7 answers with a
parse error or "unknown table function": it does not. History, VACUUM and table properties
then use SQL where the engine has it (delta-spark) and ``deltalake`` (delta-rs) on the same
files elsewhere; the change data feed exists only where the engine has it.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pipelines.errors import EngineError
from pipelines.vocabulary import delta_ident

__all__ = ["table_exists", "sql_string", "delete_where", "history", "current_version",
           "rows_written_since", "rows_in_table", "files_in_partitions", "Capabilities",
           "capabilities",
           "enable_change_data_feed", "table_id", "files_added", "set_retention", "vacuum_table",
           "target_file_size", "stats_columns_configuration", "holds_commit_rows",
           "commit_bytes", "BOUNDED_COMMIT_MB",
           "session_key", "version_unreadable", "version_files", "UNREADABLE_VERSION"]


@dataclass(frozen=True)
class Capabilities:
    """What the engine behind a session does with Delta tables beyond reads and writes."""

    describe_history: bool = False  # DESCRIBE HISTORY
    vacuum: bool = False  # VACUUM … RETAIN … [DRY RUN]
    optimize: bool = False  # OPTIMIZE … [ZORDER BY]
    change_data_feed: bool = False  # table_changes / readChangeFeed, delta.enableChangeDataFeed


# A Delta error class in the answer: the engine parsed and planned the statement.
_DELTA_ANSWER = re.compile(r"\[DELTA_[A-Z_]+\]")
_CAPS: dict[Any, Capabilities] = {}


def session_key(spark) -> Any:
    """What tells one session from another, for answers cached per session."""
    return getattr(spark, "session_id", None) or id(spark)


def _answers(spark, statement: str) -> bool:
    try:
        spark.sql(statement).collect()
    except Exception as exc:  # noqa: BLE001 - parse/unsupported/analysis errors differ per engine
        return bool(_DELTA_ANSWER.search(str(exc)))
    return True  # cannot succeed on a missing table, but an engine that runs it has it


def capabilities(spark) -> Capabilities:
    """Ask the engine (once per session) which Delta statements it has; see the module doc."""
    key = session_key(spark)
    if key not in _CAPS:
        nowhere = f"/nonexistent/binlake-capability-probe-{uuid.uuid4().hex}"
        table = delta_ident(nowhere)
        _CAPS[key] = Capabilities(
            describe_history=_answers(spark, f"DESCRIBE HISTORY {table}"),
            vacuum=_answers(spark, f"VACUUM {table} RETAIN 168 HOURS DRY RUN"),
            optimize=_answers(spark, f"OPTIMIZE {table}"),
            change_data_feed=_answers(
                spark, f"SELECT * FROM table_changes_by_path({sql_string(nowhere)}, 0)"),
        )
    return _CAPS[key]


def sql_string(value: str) -> str:
    """A SQL string literal for ``value`` (single quotes doubled, backslashes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    spark.sql(f"DELETE FROM {delta_ident(path)} WHERE {predicate}").collect()


def history(spark, path: str) -> list[dict[str, Any]]:
    """The table's commit history, newest first (version, timestamp, operation): ``DESCRIBE
    HISTORY`` where the engine has it, delta-rs on the same files elsewhere."""
    if capabilities(spark).describe_history:
        rows = spark.sql(f"DESCRIBE HISTORY {delta_ident(path)}").collect()
        return [{"version": int(r["version"]), "timestamp": str(r["timestamp"]),
                 "operation": r["operation"]} for r in rows]
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise EngineError("reading Delta history on this engine needs the deltalake package") from exc
    return [{"version": int(h.get("version")), "timestamp": str(h.get("timestamp")),
             "operation": h.get("operation")} for h in DeltaTable(path).history()]


def enable_change_data_feed(spark, path: str, rows, partition_by: list[str]) -> bool:
    """Make the table at ``path`` record a change data feed (``delta.enableChangeDataFeed``).

    A missing table is created empty from ``rows``' schema with the property (a writer option
    at create), so the feed covers every row. Returns ``False``, changing nothing, when the
    engine has no change data feed (Sail): the caller says so. Raises :class:`EngineError`
    when the table exists without the property and the engine cannot add it.
    """
    if not capabilities(spark).change_data_feed:
        return False
    table = delta_ident(path)
    if not table_exists(spark, path):
        (rows.limit(0).write.format("delta").option("delta.enableChangeDataFeed", "true")
         .partitionBy(*partition_by).save(path))
        return True
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    if props.get("delta.enableChangeDataFeed", "").lower() != "true":
        try:
            spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES "
                      "('delta.enableChangeDataFeed' = 'true')").collect()
        except Exception as exc:  # noqa: BLE001 - e.g. delta-spark 4.1.0 on Spark 4.1.4
            raise EngineError(f"silver.change_data_feed: cannot enable the change data feed on "
                              f"the existing table {path}: {str(exc).splitlines()[0]}") from exc
    return True


# What a user is told when the engine refuses a version (``binlake sql``, the SQL shell).
UNREADABLE_VERSION = ("the embedded engine (Sail 0.7.2) reads a version of a table only at or "
                      "after its latest checkpoint, at a checkpoint or one after one; read "
                      "older versions with --engine spark, or with delta-rs "
                      "(deltalake.DeltaTable(path, version=n))")


def version_unreadable(exc: BaseException) -> bool:
    """Whether ``exc`` is the embedded engine refusing to read a table at a version it could
    read a moment before. Sail 0.7.2 time-travels only to a version at or after the table's
    latest checkpoint, at a checkpoint or one after it; it checkpoints every tenth commit, so
    a DataFrame pinned at the latest version fails once a concurrent commit checkpoints
    (``Missing commit file: expected version 0, found …``). Read at the newer version then.
    delta-spark and delta-rs read every version."""
    return "Missing commit file: expected version" in str(exc)


def current_version(path: str) -> int | None:
    """The table's latest version, ``None`` when there is no table. At a local path, the
    newest version its ``_delta_log`` directory lists (what delta-rs reads first, before it
    loads the snapshot with every file's statistics: 5–7 ms after the 250 MB workload's
    history, 44 ms after 200 more runs; the listing takes well under a millisecond,
    docs/performance.md, Optimize and the small tables); elsewhere delta-rs."""
    if os.path.isabs(path):
        try:
            names = os.listdir(os.path.join(path, "_delta_log"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            names = None  # unreadable here: delta-rs says
        if names is not None:
            return _newest_listed(names)
    try:
        from deltalake import DeltaTable

        return DeltaTable(path).version()
    except Exception:  # noqa: BLE001 - TableNotFoundError and friends
        return None


def _newest_listed(names: list[str]) -> int | None:
    """The newest version a ``_delta_log`` listing names: a commit (``N.json``) or a
    checkpoint (``N.checkpoint…``) kept after older commits were cleaned up; ``None`` for
    none (a creation killed before its first commit)."""
    versions = [int(stem) for stem, _, ext in (n.partition(".") for n in names)
                if stem.isdigit() and (ext == "json" or ext.startswith("checkpoint."))]
    return max(versions, default=None)


def _commits_after(dt, version: int | None) -> list[dict[str, Any]] | None:
    """The commit infos of ``dt``'s versions after ``version`` (``None``: all), newest first,
    reading only those commits: a stream's table gains a commit every few seconds, and a run
    must not read its whole log each time (2,000 commits: 0.12 s; 5 of them: 0.005 s).
    ``None`` when one of them is gone from the log (cleaned up)."""
    latest = dt.version()
    wanted = latest + 1 if version is None else latest - version
    if wanted <= 0:
        return []
    commits = dt.history(wanted)
    if sorted(c.get("version", -1) for c in commits) != list(range(latest - wanted + 1,
                                                                    latest + 1)):
        return None
    return commits


# A commit of this operation declares a table and adds no rows; its commit info carries no
# metrics (delta-spark's, Sail's and delta-rs's CREATE TABLE; a create with rows is "CREATE
# TABLE AS SELECT", with its numOutputRows).
_DECLARES_ONLY = frozenset({"CREATE TABLE"})


def rows_written_since(path: str, version: int | None) -> int | None:
    """Rows added by the commits after ``version`` (``None`` = from the start), from the Delta
    log's ``numOutputRows`` metrics (delta-rs); ``None`` when a commit lacks them (other than
    a ``CREATE TABLE``, which adds none) or is gone."""
    try:
        from deltalake import DeltaTable

        commits = _commits_after(DeltaTable(path), version)
    except Exception:  # noqa: BLE001 - no table yet, or not readable by delta-rs
        return None
    if commits is None:
        return None
    total = 0
    for c in commits:
        rows = (c.get("operationMetrics") or {}).get("numOutputRows")
        if rows is None:
            if c.get("operation") in _DECLARES_ONLY and not c.get("operationMetrics"):
                continue
            return None
        total += int(rows)
    return total


def rows_in_table(path: str) -> int | None:
    """Rows in the table's latest version, from the Delta log's per-file statistics
    (delta-rs): no data file is read. ``None`` when a file carries no row count, the table may
    hold deletion vectors (a file's count then includes deleted rows), or delta-rs cannot read
    it: the caller then counts with the engine."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        table = DeltaTable(path)
        if "deletionVectors" in (table.protocol().writer_features or []):
            return None
        counts = pa.chunked_array(table.get_add_actions(flatten=True).column("num_records"))
    except Exception:  # noqa: BLE001 - no table yet, or not readable by delta-rs
        return None
    if counts.null_count:
        return None
    return int(pc.sum(counts).as_py() or 0)


def files_in_partitions(path: str, filters: list[tuple[str, str, Any]]) -> int | None:
    """Data files of the table's latest version that may hold rows matching ``filters``
    (delta-rs tuple filters, e.g. ``[("binlog_file", "in", [...])]``), from the Delta log
    alone: exact on partition columns, a superset on others (files their min/max statistics
    cannot rule out, and every file without them). ``None`` when delta-rs cannot say (no
    table, an unreadable store): the caller then assumes there may be some."""
    try:
        from deltalake import DeltaTable

        return len(DeltaTable(path).file_uris(file_pruning_predicate=filters))
    except Exception:  # noqa: BLE001 - delta-rs raises several kinds
        return None


def table_id(path: str) -> str | None:
    """The Delta table's metadata id (a UUID fixed at creation), ``None`` when unreadable."""
    try:
        from deltalake import DeltaTable

        return DeltaTable(path).metadata().id
    except Exception:  # noqa: BLE001 - not found / no deltalake / remote store without creds
        return None


def version_files(path: str, version: int) -> list[str] | None:
    """The data files of the table's snapshot at ``version`` (absolute URIs, delta-rs): its
    rows, read by file where a run reads a pinned version for long. The embedded engine
    re-reads the log on every query and cannot read a version once a later checkpoint
    lands (:func:`version_unreadable`); files stay readable until VACUUM. ``None`` when
    delta-rs cannot load it or the table may hold deletion vectors (a file's rows are then
    not all the table's)."""
    try:
        from deltalake import DeltaTable

        table = DeltaTable(path, version=version)
        if "deletionVectors" in (table.protocol().writer_features or []):
            return None
        return list(table.file_uris())
    except Exception:  # noqa: BLE001 - no table, no such version, unreadable store
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
        latest = DeltaTable(path)
        commits = _commits_after(latest, since_version)
        if commits is None:
            return None

        def at(v: int):  # the loaded latest snapshot when asked for it (the usual to_version)
            return latest if v == latest.version() else DeltaTable(path, version=v)

        ops = {c.get("version"): str(c.get("operation", "")).upper() for c in commits}
        if not any(ops.get(v) in _REWRITES for v in range(since_version + 1, to_version + 1)):
            old = set(at(since_version).file_uris())
            new = at(to_version).file_uris()
            return [f for f in new if f not in old]
        out: list[str] = []
        prev = set(at(since_version).file_uris())
        for v in range(since_version + 1, to_version + 1):
            files = at(v).file_uris()
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


def stats_columns_configuration(stats_columns) -> dict[str, str] | None:
    """The table property giving ``stats_columns`` min/max statistics
    (``delta.dataSkippingStatsColumns``), or None for Delta's default (the first 32)."""
    return {"delta.dataSkippingStatsColumns": ",".join(stats_columns)} if stats_columns \
        else None


def create_with_stats_columns(path: str, schema, partition_by: list[str],
                              stats_columns: list[str]) -> None:
    """Create an empty Delta table at ``path`` whose data files carry min/max statistics for
    ``stats_columns`` only (``delta.dataSkippingStatsColumns``; the engines honour it when
    they write). delta-rs: Sail 0.7 creates no path table with properties. A table created
    meanwhile by another writer is left as it is."""
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise EngineError("creating a Delta table needs the deltalake package") from exc
    try:
        DeltaTable.create(path, schema=schema, partition_by=partition_by or None, mode="ignore",
                          configuration=stats_columns_configuration(stats_columns))
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several error types
        raise EngineError(f"cannot create the Delta table at {path}: {exc}") from exc


def set_retention(path: str, *, log_retention: str, deleted_file_retention: str) -> dict[str, str]:
    """Set ``delta.logRetentionDuration`` / ``delta.deletedFileRetentionDuration``; return the
    table's properties after. delta-rs on every engine: Sail 0.7 has no ``ALTER TABLE … SET
    TBLPROPERTIES``, and delta-spark's fails on a Spark it was not built for (delta-spark
    4.1.0 on Spark 4.1.4: ``NoClassDefFoundError: IgnoreCachedData``, docs/engines.md)."""
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise EngineError("table properties need the deltalake package") from exc
    dt = DeltaTable(path)
    want = {"delta.logRetentionDuration": log_retention,
            "delta.deletedFileRetentionDuration": deleted_file_retention}
    have = dt.metadata().configuration or {}
    if any(have.get(k) != v for k, v in want.items()):
        dt.alter.set_table_properties(want)
        dt = DeltaTable(path)
    return dict(dt.metadata().configuration or {})


def vacuum_table(path: str, *, dry_run: bool = False, spark=None) -> dict[str, Any]:
    """VACUUM by the table's own ``delta.deletedFileRetentionDuration`` (retention enforced)
    and drop log entries older than ``delta.logRetentionDuration``. Returns the files removed
    (or to remove), the table version and ``via`` (``sql`` or ``delta-rs``).

    SQL ``VACUUM`` where ``spark``'s engine has it (delta-spark cleans the log itself at each
    checkpoint); elsewhere delta-rs, checkpointing first so every kept version stays readable.
    """
    if spark is not None and capabilities(spark).vacuum:
        table = delta_ident(path)
        files = [r[0] for r in spark.sql(f"VACUUM {table} DRY RUN").collect()]
        if not dry_run and files:
            spark.sql(f"VACUUM {table}").collect()
        return {"files": files, "version": history(spark, path)[0]["version"], "via": "sql"}
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
    return {"files": list(removed), "version": dt.version(), "via": "delta-rs"}


def target_file_size(mb: int) -> dict[str, str]:
    """Write options rolling a data file over at about ``mb`` MB (Sail: ``targetFileSize``;
    JVM Spark ignores it and writes one file per task, as before)."""
    return {"targetFileSize": str(mb << 20)} if mb > 0 else {}


# Binlog MB per commit (bronze.commit_mb / silver.commit_mb unset) on an engine that holds a
# commit's rows until it ends: its memory follows this, not the files' size.
BOUNDED_COMMIT_MB = 64.0
_SAIL: dict[Any, bool] = {}


def sail_engine(spark) -> bool:
    """Whether the session's engine is Sail (embedded, or a Sail server behind Spark Connect),
    which holds in memory what JVM Spark streams or spills: a commit's rows until the commit
    ends (:func:`holds_commit_rows`), a grouped aggregate's keys (``quality.unique_passes``).
    Asked once per session: Spark (local, Connect, Databricks) answers ``version()`` with its
    own version, Sail with Sail's; no answer counts as Sail, the bounded choice."""
    key = session_key(spark)
    if key not in _SAIL:
        try:
            answer = str(spark.sql("SELECT version()").collect()[0][0])
            _SAIL[key] = not answer.startswith(str(spark.version))
        except Exception:  # noqa: BLE001 - an engine without version(): stay bounded
            _SAIL[key] = True
    return _SAIL[key]


def holds_commit_rows(spark) -> bool:
    """Whether the engine's Delta writer holds a commit's rows until the commit ends, so that a
    commit's size is the engine's memory: Sail's does; JVM Spark's with delta-spark and
    Databricks' write rows to files as they come, and each extra commit costs them a job, a
    Delta commit and a slice too small to keep their cores busy (docs/performance.md,
    Other figures)."""
    return sail_engine(spark)


def commit_bytes(spark, commit_mb: float | None, *, engine_writes: bool = True) -> int:
    """Binlog bytes per commit for a ``commit_mb`` setting (0: one commit per run). Unset
    (None): :data:`BOUNDED_COMMIT_MB` where the engine's writer writes the data files
    (``engine_writes``) and holds a commit's rows (:func:`holds_commit_rows`), else one
    commit per run: where binlake's tasks write the files (``task_files``) nothing holds a
    commit's rows, and each commit more costs a job whose last tasks leave cores idle (a 1 GB
    binlog: bronze 6.5 s in one commit against 9.8 s in commits of 64 MB, the same peak
    memory: docs/performance.md, Bronze decode)."""
    if commit_mb is None:
        commit_mb = BOUNDED_COMMIT_MB if engine_writes and holds_commit_rows(spark) else 0.0
    return int(commit_mb * 2**20)
