"""Bronze's decoding tasks reach the engine spread evenly over its partitions (``task_frame``),
on the embedded engine and on JVM Spark: a file's two chunks in two partitions, so two cores
decode them. JVM Spark's ``repartition(n)`` put both chunks of one file in one partition
(one core decoded both), which this test caught before ``task_frame``."""

from __future__ import annotations

import pytest

from pipelines.bronze.job import task_frame

pytestmark = [pytest.mark.spark]


def _partitions(df) -> list[list[str]]:
    """The tasks each non-empty partition of ``df`` holds, as ``file:chunk`` texts in order."""

    def report(batches):
        import pyarrow as pa

        got = []
        for b in batches:
            got += [f"{p.rsplit('.', 1)[1]}:{c}/{n}:{s}" for p, s, c, n in
                    zip(*(b.column(k).to_pylist() for k in ("path", "source_id", "chunk",
                                                             "chunks")))]
        yield pa.record_batch([pa.array([" ".join(got)])], names=["tasks"])

    return sorted(r[0].split() for r in df.mapInArrow(report, "tasks string").collect() if r[0])


def _tasks(files: int, chunks: int) -> list[tuple[str, str, int, int]]:
    return [(f"/binlogs/mariadb-bin.{f:06d}", "src", c, chunks)
            for f in range(1, files + 1) for c in range(chunks)]


@pytest.mark.parametrize("engine", ["spark", pytest.param("delta_spark", marks=pytest.mark.jvm)])
@pytest.mark.parametrize("files, chunks, partitions, expected", [
    (1, 2, 2, [["000001:0/2:src"], ["000001:1/2:src"]]),
    (4, 2, 8, [[f"{f:06d}:{c}/2:src"] for f in range(1, 5) for c in range(2)]),
    (2, 2, 2, [["000001:0/2:src", "000001:1/2:src"], ["000002:0/2:src", "000002:1/2:src"]]),
    (3, 1, 2, [["000001:0/1:src"], ["000002:0/1:src", "000003:0/1:src"]]),
    (1, 1, 1, [["000001:0/1:src"]]),
])
def test_tasks_spread_over_the_partitions(request, engine, files, chunks, partitions,
                                          expected) -> None:
    spark = request.getfixturevalue(engine)
    df = task_frame(spark, _tasks(files, chunks), partitions)
    assert df.schema.simpleString() == ("struct<path:string,source_id:string,chunk:int,"
                                        "chunks:int>")
    assert _partitions(df) == expected
