"""Pure DataFrame transforms: bronze row changes → silver rows, or → quarantine rows.

Both run the same naming and rendering (``render_batch``), so a row is in exactly one of them:
``to_silver`` keeps the rows that render, ``to_quarantine`` the ones that cannot (with the
reason). Rendering runs in ``workers`` processes per task (``render_worker``).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from pipelines.errors import LakeChangedError
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, SILVER_QUARANTINE
from pipelines.silver.naming import NamingPlan
from pipelines.silver.null_lists import lists_not_null, restore_null_lists
from pipelines.silver.pk_hash import pk_hash
from pipelines.silver.render_worker import BATCH_ROWS, render_batches
from pipelines.lake.task_files import ADDED_DDL, FileSpec, write_files
from pipelines.vocabulary import CHANGE_TYPES

__all__ = ["BRONZE_INPUT", "CHANGE_TYPES", "SILVER_COLUMNS", "QUARANTINE_DDL", "bronze_changes",
           "to_silver", "to_silver_files", "to_quarantine", "render_workers", "on_day",
           "with_pk_hash", "with_hashes"]

BRONZE_INPUT = [
    "source_id", "server_id", "server_uuid", "binlog_file", "start_pos", "end_pos",
    "row_in_event", "event_timestamp", "gtid", "connection_id", "schema_name", "table_name",
    "event_type", "column_count", "column_types", "column_meta", "column_names",
    "column_unsigned", "column_charsets", "primary_key", "enum_values", "set_values",
    "row_before", "row_after", "before_present", "after_present", "query_text", "commit_ts_us",
    "table_map_hash",
]
# The list columns among them: NULL ones cross to the task as empty lists and a mask
# (``null_lists``: JVM Spark's Arrow exchange is quadratic in NULL lists).
_LISTS = {c: t for c, t in BRONZE_EVENTS.columns if c in BRONZE_INPUT and t.startswith("array<")}
# Declared once in the lake registry (silver/binlog_events, silver/quarantine): the rows the
# Arrow task renders are the table's columns less those added after it.
_RENDERED_DDL = SILVER_EVENTS.ddl(exclude=["pk_hash", "pk_hash_after"])
QUARANTINE_DDL = SILVER_QUARANTINE.ddl(exclude=["quarantined_at"])
SILVER_COLUMNS = SILVER_EVENTS.column_names


def render_workers(setting: int, in_subprocess: bool) -> int:
    """Rendering processes per task for ``silver.render_workers`` / ``render_in_subprocess``."""
    if not in_subprocess:
        return 0
    return setting or max(os.cpu_count() or 1, 1)




def _process(plan: NamingPlan, quarantine: bool, workers: int, compiled: bool,
             batch_rows: int, day: dt.date | None = None, files: FileSpec | None = None):
    def run(batches):
        batches = (restore_null_lists(b, _LISTS) for b in batches)
        rendered = render_batches(batches, plan, quarantine=quarantine, workers=workers,
                                  compiled=compiled, batch_rows=batch_rows)
        rendered = rendered if day is None else on_day(rendered, day)
        if files is None:
            yield from rendered
        else:
            yield from write_files(files)(with_pk_hash(b, compiled) for b in rendered)

    return run


def with_pk_hash(batch: pa.RecordBatch, compiled: bool = False) -> pa.RecordBatch:
    """Rendered rows with ``pk_hash`` and ``pk_hash_after`` (``pk_hash.pk_hash``, as the
    engines' ``sha2(pk_values, 256)``; NULL for NULL), in silver's column order."""
    cols = {name: batch.column(name) for name in batch.schema.names}
    cols["pk_hash"] = pk_hash(batch.column("pk_values"), compiled)
    after = batch.column("pk_values_after")
    cols["pk_hash_after"] = (pa.nulls(len(after), pa.string()) if after.null_count == len(after)
                             else pk_hash(after, compiled))
    return pa.RecordBatch.from_arrays([cols[c] for c in SILVER_COLUMNS], names=SILVER_COLUMNS)


def on_day(batches: Iterable[pa.RecordBatch], day: dt.date) -> Iterator[pa.RecordBatch]:
    """The rendered batches, each checked to be all of ``event_date`` ``day``:
    ``to_silver(day=…)`` writes the day as a literal, so a row of another day (bronze
    changed since the run read its days) stops the slice with ``LakeChangedError`` before
    its commit. Nothing of it is written; a re-run reads the days again."""
    want = pa.scalar(day, pa.date32())
    for b in batches:
        same = pc.equal(b.column("event_date"), want)
        if same.true_count != b.num_rows:
            i = pc.index(same.fill_null(False), False).as_py()
            raise LakeChangedError(
                f"silver: the row change of {b.column('binlog_file')[i].as_py()} at "
                f"{b.column('start_pos')[i].as_py()} has event_date "
                f"{b.column('event_date')[i].as_py()}, not {day} as bronze said when this "
                "run began: bronze changed during the run. Nothing of this commit was "
                "written; run silver again")
        yield b


def bronze_changes(bronze, null_lists: bool = False):
    """The bronze rows and columns silver renders: row changes, ``BRONZE_INPUT``; with
    ``null_lists``, NULL lists as empty lists and a mask (``null_lists``)."""
    changes = bronze.where(F.col("event_type").isin(*CHANGE_TYPES)).select(*BRONZE_INPUT)
    return lists_not_null(changes, _LISTS) if null_lists else changes


def to_silver(bronze, plan: NamingPlan, workers: int = 0, compiled: bool = True,
              null_lists: bool = True, batch_rows: int = BATCH_ROWS,
              day: dt.date | None = None):
    """Bronze rows → silver rows (``SILVER_COLUMNS``) for every change a schema names.
    ``compiled``: full images through the compiled loops (``render_fast``). ``null_lists``:
    NULL lists cross to the task as a mask (``null_lists``; needed on JVM Spark, ~0.4 s per
    680k rows on Sail, whose exchange does not need it). ``batch_rows``: rows per rendering
    batch (``render_warm.batch_rows``). ``day``: every row's ``event_date`` (checked:
    ``on_day``), written as a literal so that a partitioned write need not sort by it
    (``slices``)."""
    rendered = bronze_changes(bronze, null_lists).mapInArrow(
        _process(plan, False, workers, compiled, batch_rows, day), _RENDERED_DDL)
    if day is not None:
        rendered = rendered.withColumn("event_date", F.lit(day))
    return with_hashes(rendered).select(*SILVER_COLUMNS)


def with_hashes(rendered):
    """``rendered`` with ``pk_hash`` and ``pk_hash_after`` (``sha2(…, 256)``, NULL for NULL)."""
    return rendered.withColumns({"pk_hash": F.sha2(F.col("pk_values"), 256),
                                 "pk_hash_after": F.sha2(F.col("pk_values_after"), 256)})


def to_silver_files(bronze, plan: NamingPlan, files: FileSpec, workers: int = 0,
                    compiled: bool = True, null_lists: bool = True,
                    batch_rows: int = BATCH_ROWS, day: dt.date | None = None):
    """Bronze rows → silver's data files, written by the tasks as they render (``files``,
    ``task_files``): a row per file (``ADDED_DDL``) for ``Lake.commit_files``. Their rows
    are :func:`to_silver`'s with the same arguments."""
    return bronze_changes(bronze, null_lists).mapInArrow(
        _process(plan, False, workers, compiled, batch_rows, day, files), ADDED_DDL)


def to_quarantine(bronze, plan: NamingPlan, workers: int = 0, compiled: bool = True,
                  null_lists: bool = True, batch_rows: int = BATCH_ROWS):
    """Bronze rows → quarantine rows (bronze key and reason) for changes no schema names."""
    return bronze_changes(bronze, null_lists).mapInArrow(
        _process(plan, True, workers, compiled, batch_rows), QUARANTINE_DDL)
