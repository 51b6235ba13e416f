"""The silver table the gold tests and bench write (``devtools/silver_rows.py``): silver's
declared columns on the real engine, with the values a gold export must keep exact."""

from __future__ import annotations

import pytest

from devtools.silver_rows import ESCAPED_PK_TAIL, write_silver
from pipelines.lake.tables import SILVER_EVENTS

pytestmark = pytest.mark.spark


def test_silver_fixture_has_the_documented_columns(spark, tmp_path) -> None:
    path = str(tmp_path / "silver" / "binlog_events")
    write_silver(spark, path, 30, hours=3)
    df = spark.read.format("delta").load(path)
    from pyspark.sql import functions as F

    # Delta lists the partition column last; names and types are the contract.
    assert sorted((f.name, f.dataType.simpleString()) for f in df.schema.fields) == \
        sorted(SILVER_EVENTS.columns)
    assert df.count() == 30
    assert df.where(F.col("pk_values").contains(ESCAPED_PK_TAIL)).count() == 6
    assert df.where(F.col("pk_hash") != F.sha2("pk_values", 256)).count() == 0
