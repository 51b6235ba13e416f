"""NULL lists cross to silver's Arrow task as empty lists plus a mask, and come back exactly
(``silver/null_lists.py``): NULL stays NULL, an empty list stays empty, nested lists and
sliced batches included. On the embedded engine, end to end through ``mapInArrow``."""

import pyarrow as pa
import pytest

from pipelines.silver.null_lists import NULL_LISTS, lists_not_null, restore_null_lists
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture (make test-jvm)

DDL = "k int, a array<int>, e array<array<string>>, b array<binary>, s string"
COLUMNS = {"a": "array<int>", "e": "array<array<string>>", "b": "array<binary>"}
ROWS = [
    # k  a            e                    b             s
    (0, None,        None,                None,         None),
    (1, [],          [],                  [],           "x"),
    (2, [1, None],   [["x"], None, []],   [b"\x00"],    None),
    (3, None,        [[]],                None,         "y"),
    (4, [7],         None,                [],           "z"),
]


def _arrow(rows):
    return pa.RecordBatch.from_pylist(
        [dict(zip(["k", "a", "e", "b", "s"], r)) for r in rows],
        pa.schema([("k", pa.int32()), ("a", pa.list_(pa.int32())),
                   ("e", pa.list_(pa.list_(pa.string()))), ("b", pa.list_(pa.binary())),
                   ("s", pa.string())]))


def _round_trip(spark):
    df = lists_not_null(spark.createDataFrame(ROWS, DDL), COLUMNS)
    sent = df.collect()
    assert [r[NULL_LISTS] for r in sent] == [0b111, 0, 0, 0b101, 0b010]
    assert all(r[c] is not None for r in sent for c in COLUMNS)

    def restore(batches):
        for b in batches:
            yield restore_null_lists(b, COLUMNS)

    back = df.mapInArrow(restore, DDL).orderBy("k").collect()
    assert [tuple(r) for r in back] == [tuple(r) for r in ROWS]


@pytest.mark.spark
def test_the_engine_sends_no_null_list_and_the_task_restores_every_one(spark):
    _round_trip(spark)


def test_the_round_trip_is_exact_on_jvm_spark(jvm_spark):  # noqa: F811
    """Where the mask is for: JVM Spark's Arrow exchange (``make test-jvm``)."""
    _round_trip(jvm_spark)


@pytest.mark.parametrize("start, length", [(0, 5), (1, 3), (3, 2), (2, 0)])
def test_restore_is_exact_on_a_slice(start, length):
    rows = ROWS[start:start + length]
    sent = _arrow([tuple([] if (v is None and i in (1, 2, 3)) else v for i, v in enumerate(r))
                   for r in ROWS])
    masks = pa.array([sum(1 << i for i, c in enumerate((1, 2, 3)) if r[c] is None)
                      for r in ROWS], pa.int32())
    batch = sent.append_column(NULL_LISTS, masks).slice(start, length)
    out = restore_null_lists(batch, COLUMNS)
    assert out.schema == _arrow(ROWS).schema
    assert out.to_pylist() == _arrow(rows).to_pylist() if rows else out.num_rows == 0


def test_batches_with_and_without_null_lists_restore_to_one_schema():
    """The engine declares the coalesced columns not null; silver joins a task's batches,
    so a batch with no NULL list must come back with the same schema as one with some."""
    sent = _arrow([(1, [], [], [], "x")])
    sent = sent.cast(pa.schema([f.with_nullable(f.name not in COLUMNS) for f in sent.schema]))
    none = restore_null_lists(sent.append_column(NULL_LISTS, pa.array([0], pa.int32())), COLUMNS)
    some = restore_null_lists(sent.append_column(NULL_LISTS, pa.array([1], pa.int32())), COLUMNS)
    assert none.schema == some.schema
    assert pa.concat_batches([none, some]).to_pylist() == [
        {"k": 1, "a": [], "e": [], "b": [], "s": "x"},
        {"k": 1, "a": None, "e": [], "b": [], "s": "x"}]


def test_a_batch_without_the_mask_is_left_as_it_is():
    batch = _arrow(ROWS)
    assert restore_null_lists(batch, COLUMNS) is batch
