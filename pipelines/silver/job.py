"""The silver stage: name bronze row changes with the right schema, append them to silver.

Incremental and exactly once: a run considers the bronze files changed since silver last saw
them (``<lake>/silver/progress``) plus every file with quarantined rows, takes their bronze
row changes that silver does not hold yet (anti-join on the bronze key), appends those that
a schema names in one commit, and recomputes the quarantine of those files. A crash anywhere
is repaired by the next run: the anti-join never appends a key twice. Quarantined rows are
released the same way once a snapshot (or import) makes them nameable.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field

from pipelines.bronze.files import load_states
from pipelines.config import Config
from pipelines.delta_ops import (current_version, delete_where, enable_change_data_feed, rows_written_since, sql_string,
                                 table_exists)
from pipelines.silver.naming import NamingPlan
from pipelines.silver.transform import QUARANTINE_DDL, to_quarantine, to_silver

__all__ = ["SilverResult", "run_silver", "KEY", "QUARANTINE_DDL"]

log = logging.getLogger(__name__)

KEY = ["source_id", "binlog_file", "start_pos", "row_in_event"]
_PROGRESS_DDL = "source_id string, binlog_file string, bronze_updated_at timestamp, updated_at timestamp"


@dataclass
class SilverResult:
    files: list[tuple[str, str]] = field(default_factory=list)
    appended: int = 0
    quarantined: int = 0
    silver_version: int | None = None
    seconds: float = 0.0


def _load_snapshots(spark, cfg: Config) -> list:
    from pipelines.silver.snapshot_store import load_snapshots

    return load_snapshots(spark, cfg)


def _in_files(files: list[tuple[str, str]]) -> str:
    return " OR ".join(f"(source_id = {sql_string(s)} AND binlog_file = {sql_string(f)})"
                       for s, f in files)


def run_silver(spark, cfg: Config) -> SilverResult:
    """Bring silver up to date with bronze; see the module docstring."""
    started = time.monotonic()
    res = SilverResult()
    bronze_path = cfg.table_path("bronze", "binlog_events")
    silver_path = cfg.table_path("silver", "binlog_events")
    quarantine_path = cfg.table_path("silver", "quarantine")
    progress_path = cfg.table_path("silver", "progress")
    if not table_exists(spark, bronze_path):
        return res
    bronze_files = load_states(spark, cfg.table_path("bronze", "files"))
    seen = {}
    if table_exists(spark, progress_path):
        seen = {(r["source_id"], r["binlog_file"]): r["bronze_updated_at"]
                for r in spark.read.format("delta").load(progress_path).collect()}
    candidates = {key for key, st in bronze_files.items()
                  if st.status != "in_progress" and seen.get(key) != st.updated_at}
    has_quarantine = table_exists(spark, quarantine_path)
    if has_quarantine:
        candidates |= {(r[0], r[1]) for r in spark.read.format("delta").load(quarantine_path)
                       .select("source_id", "binlog_file").distinct().collect()}
    res.files = sorted(candidates)
    if not candidates:
        res.silver_version = current_version(silver_path)
        res.seconds = time.monotonic() - started
        return res

    ddl_rows = [(r[0], r[1], r[2], r[3], r[4]) for r in spark.read.format("delta")
                .load(bronze_path).where("event_type = 'QUERY'")
                .select("source_id", "binlog_file", "start_pos", "schema_name", "query").collect()]
    plan = NamingPlan.build(ddl_rows, _load_snapshots(spark, cfg))
    where = _in_files(res.files)
    bronze = spark.read.format("delta").load(bronze_path).where(where)

    def pending():
        if not table_exists(spark, silver_path):
            return bronze
        held = spark.read.format("delta").load(silver_path).where(where).select(*KEY)
        return bronze.join(held, KEY, "left_anti")

    if cfg.silver.change_data_feed:
        _change_data_feed(spark, silver_path, to_silver(pending(), plan))
    before = current_version(silver_path)
    (to_silver(pending(), plan).write.format("delta").mode("append")
     .partitionBy("event_date").save(silver_path))
    # The append's own commit metrics; a full count only where the log has none.
    written = rows_written_since(silver_path, before)
    res.appended = written if written is not None else _count(spark, silver_path) - (
        0 if before is None else _count_at(spark, silver_path, before))

    # What is still not in silver is exactly what no schema names: the quarantine.
    quarantined = to_quarantine(pending(), plan)
    if has_quarantine:
        delete_where(spark, quarantine_path, where)
    (quarantined.withColumn("quarantined_at", _now_col())
     .write.format("delta").mode("append").save(quarantine_path))
    res.quarantined = _count(spark, quarantine_path)

    rows = [(s, f, st.updated_at, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None))
            for (s, f), st in bronze_files.items()
            if (s, f) in candidates or (s, f) in seen]
    spark.createDataFrame(rows, _PROGRESS_DDL).write.format("delta").mode("overwrite").save(
        progress_path)
    res.silver_version = current_version(silver_path)
    res.seconds = time.monotonic() - started
    return res


def _change_data_feed(spark, path: str, rows) -> None:
    """``silver.change_data_feed``: silver records its changes (created empty first, so the
    feed covers every row). Engines without a change data feed (Sail) get a warning."""
    if not enable_change_data_feed(spark, path, rows, ["event_date"]):
        log.warning("silver.change_data_feed = true, but this engine has no Delta change data "
                    "feed (table_changes/readChangeFeed): silver is written without one; run "
                    "on Spark with delta-spark to enable it")


def _now_col():
    from pyspark.sql import functions as F

    return F.current_timestamp()


def _count_at(spark, path: str, version: int) -> int:
    return spark.read.format("delta").option("versionAsOf", version).load(path).count()


def _count(spark, path: str) -> int:
    if not table_exists(spark, path):
        return 0
    return spark.read.format("delta").load(path).count()

