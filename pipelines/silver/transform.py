"""Pure DataFrame transforms: bronze row changes → silver rows, or → quarantine rows.

Both run the same resolve-and-render code, so a row is in exactly one of them: ``to_silver``
keeps the rows that render, ``to_quarantine`` the ones that cannot (with the reason).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyspark.sql import functions as F

from pipelines.errors import SchemaMismatchError
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
_RENDERED_DDL = (
    "source_id string, server_id bigint, server_uuid string, binlog_file string, "
    "start_pos bigint, end_pos bigint, row_in_event int, seq bigint, event_timestamp timestamp, "
    "event_date date, "
    "gtid string, connection_id bigint, schema_name string, table_name string, "
    "event_type string, pk_values string, pk_kind string, changed_columns string, "
    "row_before string, row_after string, absent_columns string, schema_version string"
)
_RENDERED = pa.schema([
    ("source_id", pa.string()), ("server_id", pa.int64()), ("server_uuid", pa.string()),
    ("binlog_file", pa.string()), ("start_pos", pa.int64()), ("end_pos", pa.int64()),
    ("row_in_event", pa.int32()), ("seq", pa.int64()),
    ("event_timestamp", pa.timestamp("us", tz="UTC")), ("event_date", pa.date32()),
    ("gtid", pa.string()), ("connection_id", pa.int64()), ("schema_name", pa.string()),
    ("table_name", pa.string()), ("event_type", pa.string()), ("pk_values", pa.string()),
    ("pk_kind", pa.string()),
    ("changed_columns", pa.string()), ("row_before", pa.string()), ("row_after", pa.string()),
    ("absent_columns", pa.string()), ("schema_version", pa.string()),
])
QUARANTINE_DDL = (
    "source_id string, binlog_file string, start_pos bigint, row_in_event int, "
    "event_timestamp timestamp, schema_name string, table_name string, event_type string, "
    "column_count int, reason string"
)
_QUARANTINE = pa.schema([
    ("source_id", pa.string()), ("binlog_file", pa.string()), ("start_pos", pa.int64()),
    ("row_in_event", pa.int32()), ("event_timestamp", pa.timestamp("us", tz="UTC")),
    ("schema_name", pa.string()), ("table_name", pa.string()), ("event_type", pa.string()),
    ("column_count", pa.int32()), ("reason", pa.string()),
])
SILVER_COLUMNS = [
    "source_id", "server_id", "server_uuid", "binlog_file", "start_pos", "end_pos",
    "row_in_event", "seq", "event_timestamp", "event_date", "gtid", "connection_id",
    "schema_name", "table_name", "event_type", "pk_values", "pk_hash", "pk_kind",
    "changed_columns", "row_before", "row_after", "absent_columns", "schema_version",
]


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
