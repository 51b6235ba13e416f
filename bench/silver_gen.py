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
import json

import numpy as np
import pyarrow as pa

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
    pk_strings = np.array([str(k) for k in range(keys)], dtype=object)
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
        after = [json.dumps({"id": int(k), "qty": int(i % 97), "note": f"n{i}"}) for k, i in
                 zip(key, idx)]
        cols = {
            "source_id": pa.array(["default"] * n),
            "server_id": pa.array(np.full(n, 1, dtype=np.int64)),
            "server_uuid": pa.array(["00000000-0000-0000-0000-000000000001"] * n),
            "binlog_file": pa.array([f"mysql-bin.{f:06d}" for f in file_no]),
            "start_pos": pa.array(pos.astype(np.int64)),
            "end_pos": pa.array((pos + 180).astype(np.int64)),
            "row_in_event": pa.array(np.zeros(n, dtype=np.int32)),
            "seq": pa.array((file_no.astype(np.int64) << 32) | pos.astype(np.int64)),
            "event_timestamp": pa.array(ts_us.astype(np.int64), pa.timestamp("us", tz="UTC")),
            "event_date": pa.array((ts_us // 86_400_000_000).astype(np.int32), pa.date32()),
            "gtid": pa.array([f"0-1-{i + 1}" for i in idx]),
            "connection_id": pa.array(np.full(n, 9, dtype=np.int64)),
            "schema_name": pa.array([names[t][0] for t in tab]),
            "table_name": pa.array([names[t][1] for t in tab]),
            "event_type": pa.array(kind),
            "pk_values": pa.array(pk_strings[key]),
            "pk_hash": pa.array(hashes[key]),
            "pk_kind": pa.array(["primary"] * n),
            "changed_columns": pa.array(['["qty","note"]'] * n),
            "row_before": pa.array([None if k == "INSERT" else a for k, a in zip(kind, after)],
                                   pa.string()),
            "row_after": pa.array([None if k == "DELETE" else a for k, a in zip(kind, after)],
                                  pa.string()),
            "absent_columns": pa.array([None] * n, pa.string()),
            "schema_version": pa.array(["v1"] * n),
        }
        yield pa.table(cols, schema=SILVER_SCHEMA)
        done += n
