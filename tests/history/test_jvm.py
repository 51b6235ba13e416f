"""The history commands on a local JVM Spark with delta-spark and catalog tables: the same
flashback script as on the embedded engine, reconstruct and query through the catalog."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pipelines.history.flashback import plan_flashback, render_script
from pipelines.history.query import query_silver
from pipelines.history.reconstruct import reconstruct, resolve_point
from pipelines.history.selection import Selection
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture
from tests.history.test_flashback_mysql8 import build_mysql8_lake, check_script

pytestmark = [pytest.mark.classic, pytest.mark.soak]


def test_history_on_jvm_spark_catalog_tables(jvm_spark, corpus, tmp_path: Path  # noqa: F811
                                             ) -> None:
    spark = jvm_spark
    catalog = f"spark_catalog.binlake_{uuid.uuid4().hex[:8]}"
    cfg = build_mysql8_lake(spark, corpus, tmp_path, env={"BINLAKE_LAKE_CATALOG": catalog})
    plan = plan_flashback(spark, cfg, Selection())
    check_script(plan, render_script(plan).splitlines())
    # mysql.t before its first UPDATE (json.000001:2468): the six inserted rows, JSON embedded.
    rec = reconstruct(spark, cfg, "mysql", "t", resolve_point(spark, cfg, pos="json.000001:2468"))
    rows = [json.loads(r["image"]) for r in rec.images.collect()]
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[0]["json_col"] == {"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}
    assert rec.columns == ["id", "json_col", "name", "age"]
    history = list(query_silver(spark, cfg, Selection(table=("mysql", "t"), pk="1"), None))
    assert [c["event_type"] for c in history] == ["INSERT", "UPDATE", "UPDATE"]
