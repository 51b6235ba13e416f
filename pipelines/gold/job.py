"""The gold stage's jobs: ``init``, ``gold`` (export), ``rotate``, ``vacuum``, and status.

Only orchestration and I/O live here; DDL and partition planning are ``ddl``, row values
``rows``, the task ``exporter``, the watermark ``state``, drop planning ``rotate``.

Exactly once (``docs/gold.md``): a run reads the watermark W (a silver Delta version) from
``binlake_export_state``, pins the silver version V to export, writes the rows of the data
files added between W and V (the whole snapshot when W is unknown or its log is gone) with
duplicates as no-ops on ``uq_event_row``, and only then moves the watermark to V. A kill -9
anywhere leaves W in place; the re-run writes the same rows again, which changes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pipelines.config import Config, parse_retain
from pipelines.lake.delta_ops import (current_version, files_added, set_retention, table_id,
                                 vacuum_table, version_files)
from pipelines.mysql.client import offers_bulk_operations
from pipelines.mysql.dsn import Dsn, error_text
from pipelines.errors import ConfigError, SourceError
from pipelines.gold import ddl, index_state, snapshots, state
from pipelines.gold.client import connect, database_of, resolve_dsn
from pipelines.gold.event_ids import binlog_base
from pipelines.gold.exporter import ExportOptions, export_rows, sum_counts
from pipelines.gold.lock import holds_gold_lock
from pipelines.lake.lease import holds_lease
from pipelines.gold.rotate import (drop_partitions, gold_hour_counts, plan_rotation,
                                   silver_hour_counts)
from pipelines.lake.tables import SCHEMA_SNAPSHOTS, SILVER_EVENTS, Lake, lake_tables, read_data_files
from pipelines.vocabulary import CHANGE_TYPES, quote_ident

__all__ = ["InitResult", "GoldResult", "RotateResult", "run_init", "run_gold", "run_rotate",
           "run_vacuum", "gold_status", "resolve_dsn", "LAKE_TABLES"]

log = logging.getLogger(__name__)

# The lake's Delta tables that `binlake vacuum` keeps within the configured retention: all.
LAKE_TABLES = [(t.layer, t.name) for t in lake_tables()]
_EPOCH = dt.datetime(1970, 1, 1)


def _sql_error(dsn: Dsn, what: str, exc: BaseException) -> SourceError:
    return SourceError(f"gold {dsn}: {what}: {error_text(exc, dsn)}")


# -- init ------------------------------------------------------------------------------

@dataclass
class InitResult:
    database: str
    created_database: bool
    tables: list[str]
    partitions_added: int
    partitions: int


def _existing_hours(conn, database: str) -> list[dt.datetime]:
    return [p.hour for p in ddl.read_partitions(conn, database) if p.hour is not None]


def _ensure_partitions(conn, database: str, lo: dt.datetime, hi: dt.datetime, *,
                       floor: dt.datetime | None = None) -> int:
    existing = _existing_hours(conn, database)
    plan = ddl.plan_partitions(existing, lo, hi, floor=floor)
    if plan:
        ddl.apply_plan(conn, plan, existing)
    return len(plan.below) + len(plan.above)


def run_init(cfg: Config, *, gold_dsn: str | None = None,
             partitions: int | None = None) -> InitResult:
    """Create the gold database (if missing) and its tables; idempotent.

    ``binlog_events`` starts with ``partitions`` hourly partitions from the current UTC hour
    (bintrail's layout) plus ``p_future``; on an existing table the same span is topped up.
    Raises :class:`SourceError` when the server refuses.
    """
    import pymysql

    dsn = resolve_dsn(cfg, gold_dsn)
    n = partitions or cfg.gold.partitions
    if n < 1:
        raise ConfigError("--partitions: must be at least 1")
    db = database_of(dsn)
    now = ddl.hour_floor(ddl.utc_now())
    server = connect(dsn, database=False)
    try:
        with server.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                        (db,))
            created = int(cur.fetchone()[0]) == 0
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_ident(db)} "
                        "DEFAULT CHARACTER SET utf8mb4")
    except pymysql.err.MySQLError as exc:
        raise _sql_error(dsn, f"CREATE DATABASE {db}", exc) from exc
    finally:
        server.close()
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(ddl.create_events_sql(now, n))
            cur.execute(snapshots.CREATE_SNAPSHOTS)
            cur.execute(ddl.CREATE_STATE)
            cur.execute(ddl.CREATE_SOURCES)
            cur.execute(index_state.CREATE_INDEX_STATE)
        ddl.add_missing_columns(conn, db)
        snapshots.migrate(conn, db)
        ddl.match_bintrail_types(conn, db)
        ddl.renumber_events(conn)
        added = _ensure_partitions(conn, db, now, now + dt.timedelta(hours=n - 1))
        total = len(ddl.read_partitions(conn, db))
    except pymysql.err.MySQLError as exc:
        raise _sql_error(dsn, "creating gold tables", exc) from exc
    finally:
        conn.close()
    return InitResult(db, created, [ddl.EVENTS_TABLE, ddl.SNAPSHOTS_TABLE, ddl.STATE_TABLE,
                                    ddl.SOURCES_TABLE, index_state.INDEX_STATE_TABLE],
                      added, total)


# -- export ----------------------------------------------------------------------------

@dataclass
class GoldResult:
    database: str = ""
    mode: str = "none"  # none | incremental | full
    from_version: int = -1
    to_version: int | None = None
    files: int | None = None
    rows_read: int = 0
    rows_inserted: int = 0
    pk_marked: int = 0
    retries: int = 0
    snapshot_rows: int = 0
    method: str = ""
    tasks: int = 0
    partitions_added: int = 0
    seconds: float = 0.0
    note: str = ""


def _server_method(conn, wanted: str, tasks: int) -> str:
    """``gold.method``, or for ``auto`` what the server runs best (``docs/gold.md``): on
    MariaDB 10.2.7+ its bulk protocol (the INSERT parsed once per task, rows sent in binary);
    else LOAD DATA LOCAL when the server allows it, unless several tasks would take turns on its
    AUTO-INC lock (``innodb_autoinc_lock_mode`` below 2: a LOAD DATA holds it to the
    statement's end, a multi-row INSERT only while it takes its ids); else multi-row INSERT.
    ``bulk`` asked of another server is a ConfigError."""
    bulk = offers_bulk_operations(conn)
    if wanted == "bulk" and not bulk:
        raise ConfigError(f"gold.method: bulk needs MariaDB 10.2.7 or later; the gold server "
                          f"is {conn.server_version} (use auto, insert or load_data)")
    if wanted != "auto":
        return wanted
    return "bulk" if bulk else _text_method(conn, tasks)


def _text_method(conn, tasks: int) -> str:
    """Where there is no bulk protocol: LOAD DATA or multi-row INSERT (``_server_method``)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.local_infile, @@GLOBAL.innodb_autoinc_lock_mode")
        local_infile, lock_mode = cur.fetchone()
    if str(local_infile).upper() not in ("1", "ON"):
        return "insert"
    return "load_data" if tasks == 1 or int(lock_mode) == 2 else "insert"


def _silver_rows(spark, lake: Lake, path: str | None, watermark: int, target: int):
    """(DataFrame of the silver rows to export, mode, file count)."""
    if watermark >= 0 and path:
        files = files_added(path, watermark, target)
        if files is not None:
            if not files:
                return None, "incremental", 0
            return read_data_files(spark, SILVER_EVENTS, files), "incremental", len(files)
        log.warning("silver log for version %s is gone: exporting the whole snapshot", watermark)
    # The snapshot's data files, read as the incremental runs read theirs: an export reads
    # the pinned version for minutes, and the embedded engine cannot time-travel to it once
    # a stream's commit checkpoints silver meanwhile (delta_ops.version_unreadable).
    files = version_files(path, target) if path else None
    if files is not None:
        return (read_data_files(spark, SILVER_EVENTS, files) if files else None), "full", len(files)
    return lake.read(spark, SILVER_EVENTS, target), "full", None


@holds_gold_lock
def run_gold(spark, cfg: Config, *, gold_dsn: str | None = None) -> GoldResult:
    """Export the silver rows not yet in gold (module docstring); returns the counts.

    Creates the gold database and tables when missing. Raises :class:`SourceError` when the
    gold server refuses a statement (the watermark then stays where it was).
    """
    import pymysql
    from pyspark.sql import functions as F

    started = time.monotonic()
    run_started = ddl.utc_now().replace(microsecond=0)
    dsn = resolve_dsn(cfg, gold_dsn)
    res = GoldResult(database=database_of(dsn))
    lake = Lake.of(cfg)
    run_init(cfg, gold_dsn=gold_dsn, partitions=cfg.gold.partitions)
    if not lake.exists(spark, SILVER_EVENTS):
        res.note = f"no silver table at {lake.where(SILVER_EVENTS)}"
        return res
    silver_path = lake.location(spark, SILVER_EVENTS)
    target = lake.version(spark, SILVER_EVENTS)
    tid = table_id(silver_path) if silver_path else None
    conn = connect(dsn, autocommit=False)
    try:
        st = state.load_state(conn)
        watermark = st.silver_version
        if st.silver_table_id and tid and st.silver_table_id != tid:
            log.warning("silver was re-created (table id changed): exporting it all again")
            watermark = -1
        res.from_version, res.to_version = watermark, target
        res.snapshot_rows, versions = _export_snapshots(spark, cfg, conn)
        if target is None or watermark >= target:
            res.note = "gold is up to date"
            res.seconds = time.monotonic() - started
            return res
        df, res.mode, res.files = _silver_rows(spark, lake, silver_path, watermark, target)
        tasks = cfg.gold.parallelism or max(os.cpu_count() or 1, 1)
        res.method = _server_method(conn, cfg.gold.method, tasks)
        if df is not None:
            df = df.where(F.col("event_type").isin(*CHANGE_TYPES))
            if st.rotated_before is not None:
                cut = int((st.rotated_before - _EPOCH).total_seconds())
                df = df.where(F.col("event_timestamp").cast("long") >= F.lit(cut))
            res.partitions_added, files = _partitions_for(conn, res.database, df, cfg,
                                                          st.rotated_before)
            sources = ddl.source_numbers(conn, {(s, binlog_base(f)) for s, f in files})
            state.mark_running(conn, table_id=tid, path=silver_path or lake.where(SILVER_EVENTS),
                               target=target)
            res.tasks = tasks
            opts = ExportOptions(replace(dsn, database=res.database).url(), res.database,
                                 res.method, cfg.gold.batch_rows,
                                 tuple(sorted(sources.items())),
                                 tuple(sorted(versions.items())))
            try:
                # Rows dealt to the tasks in turn: equal shares, whatever the rows' times
                # (each task cuts its batches into hourly chunks, exporter.hour_chunks).
                spread = df.repartition(tasks)
                counts = sum_counts(export_rows(spread, opts).collect())
            except Exception as exc:  # noqa: BLE001 - engines wrap task errors differently
                msg = _first_line(exc)
                _try(lambda: state.mark_failed(conn, msg))
                raise SourceError(f"gold export to {dsn} failed (watermark stays at "
                                  f"{watermark}): {msg}") from None
            res.rows_read, res.rows_inserted = counts.rows_read, counts.rows_inserted
            res.pk_marked, res.retries = counts.pk_marked, counts.retries
            index_state.refresh(conn, {s for s, _ in sources}, {f for _, f in files},
                                run_started)
        state.mark_done(conn, table_id=tid, version=target, rows_read=res.rows_read,
                        inserted=res.rows_inserted, pk_marked=res.pk_marked,
                        method=res.method or "none")
    except pymysql.err.MySQLError as exc:
        raise _sql_error(dsn, "export", exc) from exc
    finally:
        conn.close()
    res.seconds = time.monotonic() - started
    return res


def _first_line(exc: BaseException) -> str:
    """The task's own message out of the engine's wrapped traceback."""
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith(("RuntimeError: gold export", "ValueError:", "SourceError:")):
            return ln.split(": ", 1)[1][:1000]
    for ln in reversed(lines):
        if "Error" in ln and not ln.startswith("File "):
            return ln[:1000]
    return lines[0][:1000] if lines else type(exc).__name__


def _try(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - best effort while reporting another error
        pass


def _partitions_for(conn, database: str, df, cfg: Config, floor: dt.datetime | None
                    ) -> tuple[int, set[tuple[str, str]]]:
    """Add partitions for every hour the rows fall in, then the future ones (so nothing
    lands in ``p_future``); return how many were added, and the rows' distinct
    ``(source_id, binlog_file)`` pairs (one pass over the rows for both)."""
    from pyspark.sql import functions as F

    secs = F.col("event_timestamp").cast("long")
    b = df.agg(F.min(secs).alias("lo"), F.max(secs).alias("hi"),
               F.collect_set(F.array(F.coalesce(F.col("source_id"), F.lit("default")),
                                     F.col("binlog_file"))).alias("files")).collect()[0]
    added = 0
    if b["lo"] is not None:
        lo = _EPOCH + dt.timedelta(seconds=int(b["lo"]))
        hi = _EPOCH + dt.timedelta(seconds=int(b["hi"]))
        added += _ensure_partitions(conn, database, lo, hi, floor=floor)
    now = ddl.hour_floor(ddl.utc_now())
    added += _ensure_partitions(conn, database, now,
                                now + dt.timedelta(hours=cfg.gold.partitions_ahead))
    return added, {(str(s), str(f)) for s, f in b["files"] or []}


def _export_snapshots(spark, cfg: Config, conn) -> tuple[int, dict[str, int]]:
    """Copy silver's schema_snapshots (small) into gold's, numbered (``snapshots.py``);
    existing rows are no-ops. Returns the rows added and every snapshot's gold number."""
    from pyspark.sql import functions as F

    lake = Lake.of(cfg)
    if not lake.exists(spark, SCHEMA_SNAPSHOTS):
        return 0, snapshots.numbers(conn)
    df = lake.read(spark, SCHEMA_SNAPSHOTS)
    secs = F.col("snapshot_time").cast("long").alias("snapshot_time")
    rows = df.select(*[secs if c == "snapshot_time" else F.col(c)
                       for c in snapshots.SNAPSHOT_COLUMNS]).collect()
    return snapshots.copy_snapshots(conn, [r.asDict() for r in rows])


# -- rotate ----------------------------------------------------------------------------

@dataclass
class RotateResult:
    cutoff: dt.datetime
    dropped: list[str] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)  # too old, but silver lacks rows
    partitions_added: int = 0


def run_rotate(spark, cfg: Config, *, gold_dsn: str | None = None, retain: str | None = None,
               add_future: int | None = None) -> RotateResult:
    """Drop gold partitions older than ``retain`` (``7d``/``48h``, default ``gold.retain``)
    that silver fully holds, in one DDL; then keep ``add_future`` (default
    ``gold.partitions_ahead``) hourly partitions ahead of the current hour."""
    import pymysql

    dsn = resolve_dsn(cfg, gold_dsn)
    hours = parse_retain(retain or cfg.gold.retain, setting="--retain" if retain else "gold.retain")
    ahead = cfg.gold.partitions_ahead if add_future is None else add_future
    if ahead < 0:
        raise ConfigError("--add-future: must be 0 or more")
    db = database_of(dsn)
    now = ddl.hour_floor(ddl.utc_now())
    res = RotateResult(cutoff=now - dt.timedelta(hours=hours))
    lake = Lake.of(cfg)
    conn = connect(dsn)
    try:
        parts = ddl.read_partitions(conn, db)
        if not parts:
            raise SourceError(f"gold {dsn}: no partitioned {ddl.EVENTS_TABLE} (run binlake init)")
        gold = gold_hour_counts(conn, res.cutoff)
        silver = (silver_hour_counts(lake.read(spark, SILVER_EVENTS), res.cutoff)
                  if lake.exists(spark, SILVER_EVENTS) else {})
        plan = plan_rotation(parts, res.cutoff, gold, silver)
        res.kept = [{"partition": c.partition.name, "gold_rows": c.gold_rows,
                     "silver_rows": c.silver_rows} for c in plan.keep]
        res.dropped = [c.partition.name for c in plan.drop]
        if res.dropped:
            # Rows before the newest dropped hour are never exported again.
            state.set_rotated_before(conn, max(c.hi for c in plan.drop))
            drop_partitions(conn, res.dropped)
        res.partitions_added = _ensure_partitions(conn, db, now, now + dt.timedelta(hours=ahead))
    except pymysql.err.MySQLError as exc:
        raise _sql_error(dsn, "rotate", exc) from exc
    finally:
        conn.close()
    return res


# -- vacuum ----------------------------------------------------------------------------

@holds_lease("bronze")
@holds_lease("silver")
def run_vacuum(cfg: Config, *, dry_run: bool = False, spark=None) -> list[dict[str, Any]]:
    """Set the retention properties from ``gold.log_retention`` /
    ``gold.deleted_file_retention`` (or the table's own retention in the registry) on every
    lake table, then VACUUM it by them: SQL where ``spark``'s engine has it, else delta-rs on
    the table's files (:mod:`pipelines.lake.delta_ops`); in catalog mode ``spark`` finds them
    through the catalog."""
    lake = Lake.of(cfg)
    if lake.uses_catalog and spark is None:
        raise ConfigError("lake.catalog: vacuum needs a Spark session to find the tables")
    out = []
    from pipelines.mirror.job import mirror_table_paths

    tables = [(t.key, lake.location(spark, t), t.retention) for t in lake_tables()]
    for key, path, retention in tables + [(k, p, None) for k, p in mirror_table_paths(cfg)]:
        if path is None or current_version(path) is None:
            continue
        props = set_retention(path, log_retention=cfg.gold.log_retention,
                              deleted_file_retention=retention
                              or cfg.gold.deleted_file_retention)
        done = vacuum_table(path, dry_run=dry_run, spark=spark)
        out.append({"table": key, "path": path, "version": done["version"],
                    "files_removed": len(done["files"]), "dry_run": dry_run, "via": done["via"],
                    "properties": {k: v for k, v in props.items() if "Retention" in k}})
    return out


# -- status ----------------------------------------------------------------------------

def gold_status(cfg: Config, *, gold_dsn: str | None = None, spark=None) -> dict[str, Any]:
    """Export watermark and lag, partitions with InnoDB's estimated rows; JSON-able.

    ``{"configured": False}`` without a DSN; ``{"error": ...}`` when the server is away
    (status must not fail because gold is down).
    """
    import pymysql

    url = gold_dsn or cfg.gold.dsn
    if not url:
        return {"configured": False}
    try:
        dsn = resolve_dsn(cfg, gold_dsn)
    except ConfigError as exc:
        return {"configured": True, "error": str(exc)}
    db = database_of(dsn)
    out: dict[str, Any] = {"configured": True, "dsn": str(dsn), "database": db}
    silver_version = Lake.of(cfg).version(spark, SILVER_EVENTS)
    try:
        conn = connect(dsn)
    except SourceError as exc:
        out["error"] = str(exc)
        return out
    try:
        parts = ddl.read_partitions(conn, db)
        if not parts:
            out["error"] = f"no {ddl.EVENTS_TABLE} table (run binlake init)"
            return out
        st = state.load_state(conn)
        with conn.cursor() as cur:
            cur.execute(f"SELECT MIN(event_timestamp), MAX(event_timestamp) "
                        f"FROM {quote_ident(ddl.EVENTS_TABLE)}")
            earliest, latest = cur.fetchone()
        wm = st.silver_version
        out.update({
            "watermark": {k: v for k, v in asdict(st).items() if k != "export_name"},
            "silver_version": silver_version,
            "lag_versions": (silver_version - wm) if silver_version is not None else None,
            "earliest_event": earliest, "latest_event": latest,
            "lag_seconds": int((ddl.utc_now() - latest).total_seconds()) if latest else None,
            "partitions": [{"name": p.name, "estimated_rows": p.estimated_rows} for p in parts],
            "p_future_estimated_rows": next((p.estimated_rows for p in parts
                                             if p.hour is None), 0),
            "pk_values_marked_last_run": st.last_pk_marked,
        })
    except pymysql.err.MySQLError as exc:
        out["error"] = f"gold {dsn}: {error_text(exc, dsn)}"
    finally:
        conn.close()
    return out

