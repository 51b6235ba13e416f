"""Pure DataFrame transforms: bronze row changes → silver rows, or → quarantine rows.

Both run the same resolve-and-render code, so a row is in exactly one of them: ``to_silver``
keeps the rows that render, ``to_quarantine`` the ones that cannot (with the reason).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyspark.sql import functions as F

from pipelines.errors import SchemaMismatchError
from pipelines.lake import SILVER_EVENTS, SILVER_QUARANTINE
from pipelines.silver.images import TableRenderer
from pipelines.silver.naming import BronzeTableMap, NamingPlan, file_number

__all__ = ["BRONZE_INPUT", "SILVER_COLUMNS", "QUARANTINE_DDL", "to_silver", "to_quarantine"]

BRONZE_INPUT = [
    "source_id", "server_id", "server_uuid", "binlog_file", "start_pos", "end_pos",
    "row_in_event", "event_timestamp", "gtid", "connection_id", "schema_name", "table_name",
    "event_type", "column_count", "column_types", "column_meta", "column_names",
    "column_unsigned", "column_charsets", "primary_key", "enum_values", "set_values",
    "row_before", "row_after", "before_present", "after_present",
]
# Declared once in the lake registry (silver/binlog_events, silver/quarantine): the rows the
# Arrow task renders are the table's columns less those added after it.
_RENDERED_DDL = SILVER_EVENTS.ddl(exclude=["pk_hash"])
_RENDERED = SILVER_EVENTS.arrow_schema(exclude=["pk_hash"])
QUARANTINE_DDL = SILVER_QUARANTINE.ddl(exclude=["quarantined_at"])
_QUARANTINE = SILVER_QUARANTINE.arrow_schema(exclude=["quarantined_at"])
SILVER_COLUMNS = SILVER_EVENTS.column_names


_UTC = dt.timezone.utc


def _tup(v):
    if v is None:
        return None
    return tuple(_tup(x) if isinstance(x, list) else x for x in v)


def _table_map(row: dict) -> BronzeTableMap:
    return BronzeTableMap(
        _tup(row["column_types"]), _tup(row["column_meta"]), _tup(row["column_names"]),
        _tup(row["column_unsigned"]), _tup(row["column_charsets"]), _tup(row["primary_key"]),
        _tup(row["enum_values"]), _tup(row["set_values"]))


def _seq(binlog_file: str, start_pos: int, row_in_event: int) -> int:
    # A row's index is below its event's length, so start_pos + row_in_event stays below the
    # next event's start: strictly increasing in binlog order (docs/silver.md).
    return file_number(binlog_file) << 32 | (start_pos + row_in_event)


def _process(plan: NamingPlan, quarantine: bool):
    renderers: dict = {}

    def run(batches):
        for batch in batches:
            rows = batch.to_pylist()
            out = []
            for r in rows:
                try:
                    spec = plan.resolve(r["source_id"], r["schema_name"], r["table_name"],
                                        r["binlog_file"], r["start_pos"], _table_map(r))
                    tr = renderers.get(spec)
                    if tr is None:
                        tr = renderers[spec] = TableRenderer(spec)
                    img = tr.render(r["event_type"], r["row_before"], r["row_after"],
                                    r["before_present"], r["after_present"])
                except SchemaMismatchError as exc:
                    if quarantine:
                        out.append({
                            "source_id": r["source_id"], "binlog_file": r["binlog_file"],
                            "start_pos": r["start_pos"], "row_in_event": r["row_in_event"],
                            "event_timestamp": r["event_timestamp"],
                            "schema_name": r["schema_name"], "table_name": r["table_name"],
                            "event_type": r["event_type"], "column_count": r["column_count"],
                            "reason": str(exc)})
                    continue
                if quarantine:
                    continue
                ts = r["event_timestamp"]
                out.append({
                    "source_id": r["source_id"], "server_id": r["server_id"],
                    "server_uuid": r["server_uuid"], "binlog_file": r["binlog_file"],
                    "start_pos": r["start_pos"], "end_pos": r["end_pos"],
                    "row_in_event": r["row_in_event"],
                    "seq": _seq(r["binlog_file"], r["start_pos"], r["row_in_event"]),
                    "event_timestamp": ts, "event_date": ts.astimezone(_UTC).date(),
                    "gtid": r["gtid"], "connection_id": r["connection_id"], "schema_name": r["schema_name"],
                    "table_name": r["table_name"], "event_type": r["event_type"],
                    "pk_values": img.pk_values, "pk_kind": spec.pk_kind,
                    "changed_columns": img.changed_columns, "row_before": img.row_before,
                    "row_after": img.row_after, "absent_columns": img.absent_columns,
                    "schema_version": spec.schema_version})
            schema = _QUARANTINE if quarantine else _RENDERED
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=schema)

    return run


def _changes(bronze):
    return bronze.where(F.col("event_type").isin("INSERT", "UPDATE", "DELETE")).select(*BRONZE_INPUT)


def to_silver(bronze, plan: NamingPlan):
    """Bronze rows → silver rows (``SILVER_COLUMNS``) for every change a schema names."""
    rendered = _changes(bronze).mapInArrow(_process(plan, False), _RENDERED_DDL)
    return rendered.withColumn("pk_hash", F.sha2(F.col("pk_values"), 256)).select(*SILVER_COLUMNS)


def to_quarantine(bronze, plan: NamingPlan):
    """Bronze rows → quarantine rows (bronze key and reason) for changes no schema names."""
    return _changes(bronze).mapInArrow(_process(plan, True), QUARANTINE_DDL)
