"""A DataFrame's NULL lists carried to ``mapInArrow`` as empty lists plus a bitmask, and back.

Why: JVM Spark (4.1) cuts the Arrow batches it sends to Python at
``spark.sql.execution.arrow.maxBytesPerBatch`` (64 MB by default) by asking the batch's size
after every row, and Arrow Java's ``ListVector`` walks back over every NULL list since the
last non-NULL one to answer: quadratic in a batch's run of NULL lists. Bronze row changes hold
many (the TABLE_MAP fact columns since they moved to TABLE_MAP rows, an INSERT's before image,
a DELETE's after image), and silver's exchange took 16.8 s instead of 2.8 s on 164k row
changes (docs/performance.md, Tried and dropped). Empty lists cost nothing there, NULL strings and
structs neither; the byte limit stays (it bounds a batch of large BLOB images).

``lists_not_null`` (engine side) and ``restore_null_lists`` (the Python task) are exact
inverses: the mask says which lists were NULL, so an empty list stays empty.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

__all__ = ["NULL_LISTS", "lists_not_null", "restore_null_lists"]

NULL_LISTS = "_null_lists"  # bit i set: columns[i] was NULL on this row


def lists_not_null(df, lists: Mapping[str, str]):
    """``df`` with each column of ``lists`` (name → Spark DDL type, ``array<…>``; at most 31,
    bit i for the i-th) NULL → empty, and the ``NULL_LISTS`` bitmask column added last. The
    types are given, not asked of ``df``: no analysis round trip per call."""
    if len(lists) > 31:
        raise ValueError("lists_not_null: at most 31 columns fit the mask")
    mask = sum((F.when(F.col(c).isNull(), 1 << i).otherwise(0) for i, c in enumerate(lists)),
               F.lit(0))
    # One projection: the mask reads the columns before they are coalesced.
    return df.withColumns({**{c: F.coalesce(F.col(c), F.array().cast(t))
                              for c, t in lists.items()}, NULL_LISTS: mask})


def restore_null_lists(batch: pa.RecordBatch, columns: Iterable[str]) -> pa.RecordBatch:
    """Pure: ``batch`` from ``lists_not_null`` as it was before: the lists the mask names
    NULL again (values not copied), the mask column dropped, ``columns`` nullable in every
    batch alike (the engine may declare them not null: batches are joined later)."""
    at = batch.schema.get_field_index(NULL_LISTS)
    if at < 0:
        return batch
    mask = batch.column(at)
    batch = batch.remove_column(at)
    any_null = batch.num_rows and pc.max(mask).as_py()
    for i, name in enumerate(columns):
        j = batch.schema.get_field_index(name)
        lists = batch.column(j)
        null = pc.not_equal(pc.bit_wise_and(mask, 1 << i), 0) if any_null else None
        if null is not None and pc.any(null).as_py():
            offsets, values = lists.offsets, lists.values
            if offsets.offset:  # a slice: Arrow takes a mask only over offsets of their own
                start = offsets[0].as_py()
                values = values.slice(start, offsets[-1].as_py() - start)
                offsets = pc.subtract(offsets, pa.scalar(start, offsets.type))
            lists = pa.ListArray.from_arrays(offsets, values, type=lists.type, mask=null)
        batch = batch.set_column(j, batch.schema.field(j).with_nullable(True), lists)
    return batch
