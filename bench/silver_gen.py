"""Silver-shaped rows, made fast with pyarrow and written as many small Delta commits.

The real pipeline (binlog → bronze → silver) runs at a few thousand rows/s on 2 cores, far too
slow to build a 5–10 million row silver for a layout benchmark. This module writes rows with
silver's exact schema (``pipelines.silver.transform.SILVER_COLUMNS``, partitioned by
``event_date``) straight through delta-rs, one commit per micro-batch, so the table ends up
with the many small files a stream or many small binlogs leave.

The workload: ``tables`` tables spread over a few schemas, ``keys`` distinct primary keys in all
(key ``k`` in table ``k % tables``); each change picks a key (a key's history is several changes spread over days), in
binlog order (``seq`` strictly increasing, timestamps rising over ``days`` days).
"""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["SILVER_SCHEMA", "silver_batches", "pk_hash", "table_names"]

SILVER_SCHEMA = pa.schema([
    ("source_id", pa.string()), ("server_id", pa.int64()), ("server_uuid", pa.string()),
    ("binlog_file", pa.string()), ("start_pos", pa.int64()), ("end_pos", pa.int64()),
    ("row_in_event", pa.int32()), ("seq", pa.int64()),
    ("event_timestamp", pa.timestamp("us", tz="UTC")), ("event_date", pa.date32()),
    ("gtid", pa.string()), ("connection_id", pa.int64()), ("schema_name", pa.string()),
    ("table_name", pa.string()), ("event_type", pa.string()), ("pk_values", pa.string()),
    ("pk_hash", pa.string()), ("pk_kind", pa.string()), ("changed_columns", pa.string()),
    ("row_before", pa.string()), ("row_after", pa.string()), ("absent_columns", pa.string()),
    ("schema_version", pa.string()),
])
_START = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
_EVENT_TYPES = np.array(["INSERT", "UPDATE", "UPDATE", "UPDATE", "DELETE"])


def pk_hash(pk_values: str) -> str:
    """Silver's ``pk_hash``: SHA-256 hex of ``pk_values``."""
    return hashlib.sha256(pk_values.encode()).hexdigest()


def table_names(tables: int) -> list[tuple[str, str]]:
    """``(schema, table)`` of the workload: four schemas, ``tables`` tables in all."""
    return [(f"shop{i % 4}", f"t{i:03d}") for i in range(tables)]


def silver_batches(rows: int, batch_rows: int, *, tables: int = 40, keys: int = 200_000,
                   days: int = 10, seed: int = 7):
    """Yield Arrow tables of ``batch_rows`` silver rows each, ``rows`` in all, binlog order."""
    rng = np.random.default_rng(seed)
    names = table_names(tables)
    hashes = np.array([pk_hash(str(k)) for k in range(keys)], dtype=object)
    schema_of = np.array([s for s, _ in names], dtype=object)
    table_of = np.array([t for _, t in names], dtype=object)
    seconds = days * 86400
    done = 0
    while done < rows:
        n = min(batch_rows, rows - done)
        idx = np.arange(done, done + n)
        key = rng.integers(0, keys, n)
        tab = key % tables  # a key belongs to one table
        kind = _EVENT_TYPES[rng.integers(0, len(_EVENT_TYPES), n)]
        ts_us = (_START.timestamp() + idx * (seconds / rows)) * 1_000_000
        file_no = 1 + idx // 500_000
        pos = 4 + (idx % 500_000) * 200
        # Strings built column-wise by Arrow kernels: a Python loop per row would make the
        # generator, not the lake, the slow part.
        key_s = pc.cast(pa.array(key), pa.string())
        idx_s = pc.cast(pa.array(idx), pa.string())
        image = pc.binary_join_element_wise(
            '{"id":', key_s, ',"qty":', pc.cast(pa.array(idx % 97), pa.string()),
            ',"note":"n', idx_s, '"}', "")
        is_insert = pa.array(kind == "INSERT")
        is_delete = pa.array(kind == "DELETE")
        null_image = pa.nulls(n, pa.string())
        cols = {
            "source_id": pa.array(np.full(n, "default", dtype=object), pa.string()),
            "server_id": pa.array(np.full(n, 1, dtype=np.int64)),
            "server_uuid": pa.array(np.full(n, "00000000-0000-0000-0000-000000000001",
                                            dtype=object), pa.string()),
            "binlog_file": pc.binary_join_element_wise(
                "mysql-bin.", pc.utf8_lpad(pc.cast(pa.array(file_no), pa.string()), 6, "0"), ""),
            "start_pos": pa.array(pos.astype(np.int64)),
            "end_pos": pa.array((pos + 180).astype(np.int64)),
            "row_in_event": pa.array(np.zeros(n, dtype=np.int32)),
            "seq": pa.array((file_no.astype(np.int64) << 32) | pos.astype(np.int64)),
            "event_timestamp": pa.array(ts_us.astype(np.int64), pa.timestamp("us", tz="UTC")),
            "event_date": pa.array((ts_us // 86_400_000_000).astype(np.int32), pa.date32()),
            "gtid": pc.binary_join_element_wise("0-1-", pc.cast(pa.array(idx + 1), pa.string()),
                                                ""),
            "connection_id": pa.array(np.full(n, 9, dtype=np.int64)),
            "schema_name": pa.array(schema_of[tab], pa.string()),
            "table_name": pa.array(table_of[tab], pa.string()),
            "event_type": pa.array(kind, pa.string()),
            "pk_values": key_s,
            "pk_hash": pa.array(hashes[key], pa.string()),
            "pk_kind": pa.array(np.full(n, "primary", dtype=object), pa.string()),
            "changed_columns": pa.array(np.full(n, '["qty","note"]', dtype=object), pa.string()),
            "row_before": pc.if_else(is_insert, null_image, image),
            "row_after": pc.if_else(is_delete, null_image, image),
            "absent_columns": null_image,
            "schema_version": pa.array(np.full(n, "v1", dtype=object), pa.string()),
        }
        yield pa.table(cols, schema=SILVER_SCHEMA)
        done += n
