"""I/O: the TABLE_MAP rows of bronze, by ``table_map_hash``.

Bronze writes a table's TABLE_MAP facts (``records.TABLE_MAP_FIELDS``: column types, metadata,
names, keys, ENUM/SET labels) once per decoding task and distinct map, on a ``TABLE_MAP`` row,
and each row change names them by ``table_map_hash`` (docs/bronze.md). Written before that,
every row change carried the facts itself: readers take a row's own facts when it has them.
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bronze.records import BRONZE_SCHEMA, TABLE_MAP_FIELDS
from pipelines.lake.tables import BRONZE_EVENTS

__all__ = ["read_table_maps", "table_maps_in", "with_facts"]


def table_maps_in(batches: Iterable[pa.RecordBatch | pa.Table]) -> dict[int, dict[str, Any]]:
    """Pure: ``table_map_hash`` → facts of the TABLE_MAP rows among ``batches``."""
    out: dict[int, dict[str, Any]] = {}
    for b in batches:
        maps = b.filter(pc.equal(b.column("event_type"), "TABLE_MAP"))
        for r in maps.select(["table_map_hash", *TABLE_MAP_FIELDS]).to_pylist():
            out.setdefault(r.pop("table_map_hash"), r)
    return out


def with_facts(batch: pa.RecordBatch, maps: dict[int, dict[str, Any]]) -> pa.RecordBatch:
    """Pure: ``batch`` with each row change's TABLE_MAP facts on the row itself, as bronze
    wrote them before the TABLE_MAP rows (rows that have theirs, or name no map in ``maps``,
    are left as they are)."""
    keys = list(maps)
    if not keys or not batch.num_rows:
        return batch
    at = pc.index_in(batch.column("table_map_hash"), pa.array(keys, pa.int64()))
    need = pc.and_(pc.is_null(batch.column(TABLE_MAP_FIELDS[0])), pc.is_valid(at))
    for name in TABLE_MAP_FIELDS:
        i = batch.schema.get_field_index(name)
        if i < 0:  # a batch of some columns only (silver's input has no column_nullable)
            continue
        typ = BRONZE_SCHEMA.field(name).type
        facts = pa.array([maps[k][name] for k in keys], typ).take(at)
        batch = batch.set_column(i, name, pc.if_else(need, facts, batch.column(i)))
    return batch


def read_table_maps(spark, lake, where: str | None = None) -> dict[int, dict[str, Any]]:
    """``table_map_hash`` → the TABLE_MAP facts (a dict of ``TABLE_MAP_FIELDS``) of the bronze
    rows ``where`` selects (a SQL predicate; ``None``: every file). Equal hashes hold equal
    facts, so the copies several tasks wrote collapse into one."""
    if not lake.exists(spark, BRONZE_EVENTS):
        return {}
    rows = lake.read(spark, BRONZE_EVENTS).where("event_type = 'TABLE_MAP'")
    if where:
        rows = rows.where(where)
    out: dict[int, dict[str, Any]] = {}
    for r in rows.select("table_map_hash", *TABLE_MAP_FIELDS).collect():
        if r[0] not in out:
            out[r[0]] = {c: r[c] for c in TABLE_MAP_FIELDS}
    return out
