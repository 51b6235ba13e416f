"""Pure DataFrame transforms: bronze row changes → silver rows, or → quarantine rows.

Both run the same naming and rendering (``render_batch``), so a row is in exactly one of them:
``to_silver`` keeps the rows that render, ``to_quarantine`` the ones that cannot (with the
reason). Rendering runs in ``workers`` processes per task (``render_worker``).
"""

from __future__ import annotations

import os

from pyspark.sql import functions as F

from pipelines.silver.naming import NamingPlan
from pipelines.silver.render_worker import render_batches

__all__ = ["BRONZE_INPUT", "SILVER_COLUMNS", "QUARANTINE_DDL", "to_silver", "to_quarantine",
           "render_workers"]

BRONZE_INPUT = [
    "source_id", "server_id", "server_uuid", "binlog_file", "start_pos", "end_pos",
    "row_in_event", "event_timestamp", "gtid", "connection_id", "schema_name", "table_name",
    "event_type", "column_count", "column_types", "column_meta", "column_names",
    "column_unsigned", "column_charsets", "primary_key", "enum_values", "set_values",
    "row_before", "row_after", "before_present", "after_present",
]
_RENDERED_DDL = (
    "source_id string, server_id bigint, server_uuid string, binlog_file string, "
    "start_pos bigint, end_pos bigint, row_in_event int, seq bigint, event_timestamp timestamp, "
    "event_date date, "
    "gtid string, connection_id bigint, schema_name string, table_name string, "
    "event_type string, pk_values string, pk_kind string, changed_columns string, "
    "row_before string, row_after string, absent_columns string, schema_version string"
)
QUARANTINE_DDL = (
    "source_id string, binlog_file string, start_pos bigint, row_in_event int, "
    "event_timestamp timestamp, schema_name string, table_name string, event_type string, "
    "column_count int, reason string"
)
SILVER_COLUMNS = [
    "source_id", "server_id", "server_uuid", "binlog_file", "start_pos", "end_pos",
    "row_in_event", "seq", "event_timestamp", "event_date", "gtid", "connection_id",
    "schema_name", "table_name", "event_type", "pk_values", "pk_hash", "pk_kind",
    "changed_columns", "row_before", "row_after", "absent_columns", "schema_version",
]


def render_workers(setting: int, in_subprocess: bool) -> int:
    """Rendering processes per task for ``silver.render_workers`` / ``render_in_subprocess``."""
    if not in_subprocess:
        return 0
    return setting or max(os.cpu_count() or 1, 1)


def _process(plan: NamingPlan, quarantine: bool, workers: int):
    def run(batches):
        yield from render_batches(batches, plan, quarantine=quarantine, workers=workers)

    return run


def _changes(bronze):
    return bronze.where(F.col("event_type").isin("INSERT", "UPDATE", "DELETE")).select(*BRONZE_INPUT)


def to_silver(bronze, plan: NamingPlan, workers: int = 0):
    """Bronze rows → silver rows (``SILVER_COLUMNS``) for every change a schema names."""
    rendered = _changes(bronze).mapInArrow(_process(plan, False, workers), _RENDERED_DDL)
    return rendered.withColumn("pk_hash", F.sha2(F.col("pk_values"), 256)).select(*SILVER_COLUMNS)


def to_quarantine(bronze, plan: NamingPlan, workers: int = 0):
    """Bronze rows → quarantine rows (bronze key and reason) for changes no schema names."""
    return _changes(bronze).mapInArrow(_process(plan, True, workers), QUARANTINE_DDL)
