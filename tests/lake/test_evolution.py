"""A lake table written before a column was declared keeps working, on both engines: reads
give the new column as NULL, the next append adds it (Delta schema evolution, ``mergeSchema``)
and older rows read it as NULL. Sail (embedded) and JVM Spark with delta-spark, by path and
as a catalog table (``lake.catalog``: ``writeTo(…).append()`` with the option).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pipelines.lake.tables import Lake, LakeTable

pytestmark = [pytest.mark.spark]

OLD = "id bigint, p string"
TABLE = LakeTable("t", "evolving", (("id", "bigint"), ("p", "string"), ("query_text", "string"),
                                    ("commit_ts_us", "bigint")), ("p",))


def _evolve(session, root: Path, catalog: str = "") -> None:
    lake = Lake(str(root), catalog)
    session.createDataFrame([(1, "x")], OLD).write.format("delta").partitionBy("p") \
        .save(lake.path(TABLE))
    # reading the old table: the declared columns it lacks are typed NULLs
    old = lake.read(session, TABLE)
    assert dict(old.dtypes)["commit_ts_us"] == "bigint"
    assert [tuple(r) for r in old.select(*TABLE.column_names).collect()] == [(1, "x", None, None)]
    new = session.createDataFrame([(2, "x", "UPDATE t SET a = 1", 1703581289681456)],
                                  TABLE.ddl())
    lake.append(new, TABLE)
    raw = (session.read.table(lake.ident(TABLE)) if catalog  # the table itself evolved
           else session.read.format("delta").load(lake.path(TABLE)))
    assert set(TABLE.column_names) <= set(raw.columns)
    rows = sorted(tuple(r) for r in raw.select(*TABLE.column_names).collect())
    assert rows == [(1, "x", None, None), (2, "x", "UPDATE t SET a = 1", 1703581289681456)]
    lake.append(new, TABLE)  # a current table: appends as before
    assert lake.read(session, TABLE).count() == 3


def test_sail_evolves_an_older_table(spark, tmp_path: Path) -> None:
    _evolve(spark, tmp_path)


def test_delta_spark_evolves_an_older_table(delta_spark, tmp_path: Path) -> None:
    _evolve(delta_spark, tmp_path)


def test_sail_evolves_an_older_catalog_table(spark, tmp_path: Path) -> None:
    _evolve(spark, tmp_path, f"spark_catalog.evolve_{uuid.uuid4().hex[:8]}")


def test_delta_spark_evolves_an_older_catalog_table(delta_spark, tmp_path: Path) -> None:
    _evolve(delta_spark, tmp_path, f"spark_catalog.evolve_{uuid.uuid4().hex[:8]}")
