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
from pipelines.delta_ops import (enable_change_data_feed, rows_written_since, sql_string,
                                 target_file_size)
from pipelines.lake import (BRONZE_EVENTS, SILVER_EVENTS, SILVER_PROGRESS, SILVER_QUARANTINE,
                            Lake)
from pipelines.lease import holds_lease
from pipelines.silver.naming import NamingPlan
from pipelines.silver.transform import QUARANTINE_DDL, render_workers, to_quarantine, to_silver

__all__ = ["SilverResult", "run_silver", "KEY", "QUARANTINE_DDL"]

log = logging.getLogger(__name__)

KEY = ["source_id", "binlog_file", "start_pos", "row_in_event"]
_PROGRESS_DDL = SILVER_PROGRESS.ddl()


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


@holds_lease("silver")
def run_silver(spark, cfg: Config) -> SilverResult:
    """Bring silver up to date with bronze; see the module docstring."""
    started = time.monotonic()
    res = SilverResult()
    lake = Lake.of(cfg)
    if not lake.exists(spark, BRONZE_EVENTS):
        return res
    bronze_files = load_states(spark, lake)
    seen = {}
    if lake.exists(spark, SILVER_PROGRESS):
        seen = {(r["source_id"], r["binlog_file"]): r["bronze_updated_at"]
                for r in lake.read(spark, SILVER_PROGRESS).collect()}
    candidates = {key for key, st in bronze_files.items()
                  if st.status != "in_progress" and seen.get(key) != st.updated_at}
    has_quarantine = lake.exists(spark, SILVER_QUARANTINE)
    if has_quarantine:
        candidates |= {(r[0], r[1]) for r in lake.read(spark, SILVER_QUARANTINE)
                       .select("source_id", "binlog_file").distinct().collect()}
    res.files = sorted(candidates)
    if not candidates:
        res.silver_version = lake.version(spark, SILVER_EVENTS)
        res.seconds = time.monotonic() - started
        return res

    ddl_rows = [(r[0], r[1], r[2], r[3], r[4]) for r in lake.read(spark, BRONZE_EVENTS)
                .where("event_type = 'QUERY'")
                .select("source_id", "binlog_file", "start_pos", "schema_name", "query").collect()]
    plan = NamingPlan.build(ddl_rows, _load_snapshots(spark, cfg))
    where = _in_files(res.files)
    bronze = lake.read(spark, BRONZE_EVENTS).where(where)

    def pending():
        if not lake.exists(spark, SILVER_EVENTS):
            return bronze
        held = lake.read(spark, SILVER_EVENTS).where(where).select(*KEY)
        return bronze.join(held, KEY, "left_anti")

    workers = render_workers(cfg.silver.render_workers, cfg.silver.render_in_subprocess)
    if cfg.silver.change_data_feed:
        _change_data_feed(spark, lake, to_silver(pending(), plan, workers))
    before = lake.version(spark, SILVER_EVENTS)
    lake.append(to_silver(pending(), plan, workers), SILVER_EVENTS,
                options=target_file_size(cfg.silver.target_file_mb))
    # The append's own commit metrics; a full count only where the log has none.
    written = rows_written_since(lake.location(spark, SILVER_EVENTS), before)
    res.appended = written if written is not None else _count(spark, lake, SILVER_EVENTS) - (
        0 if before is None else _count(spark, lake, SILVER_EVENTS, before))

    # What is still not in silver is exactly what no schema names: the quarantine.
    quarantined = to_quarantine(pending(), plan, workers)
    if has_quarantine:
        lake.delete_where(spark, SILVER_QUARANTINE, where)
    lake.append(quarantined.withColumn("quarantined_at", _now_col()), SILVER_QUARANTINE)
    res.quarantined = _count(spark, lake, SILVER_QUARANTINE)

    rows = [(s, f, st.updated_at, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None))
            for (s, f), st in bronze_files.items()
            if (s, f) in candidates or (s, f) in seen]
    lake.overwrite(spark.createDataFrame(rows, _PROGRESS_DDL), SILVER_PROGRESS)
    res.silver_version = lake.version(spark, SILVER_EVENTS)
    res.seconds = time.monotonic() - started
    return res


def _change_data_feed(spark, lake: Lake, rows) -> None:
    """``silver.change_data_feed``: silver records its changes (created empty first, so the
    feed covers every row). Engines without a change data feed (Sail) get a warning."""
    if lake.uses_catalog and lake.managed:
        log.warning("silver.change_data_feed: set delta.enableChangeDataFeed on the managed "
                    "table %s in the catalog (binlake sets it on path and external tables)",
                    lake.ident(SILVER_EVENTS))
        return
    if not enable_change_data_feed(spark, lake.path(SILVER_EVENTS), rows,
                                   list(SILVER_EVENTS.partition_by)):
        log.warning("silver.change_data_feed = true, but this engine has no Delta change data "
                    "feed (table_changes/readChangeFeed): silver is written without one; run "
                    "on Spark with delta-spark to enable it")


def _now_col():
    from pyspark.sql import functions as F

    return F.current_timestamp()


def _count(spark, lake: Lake, table, version: int | None = None) -> int:
    if not lake.exists(spark, table):
        return 0
    return lake.read(spark, table, version).count()

