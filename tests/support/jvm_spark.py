"""A local JVM Spark with delta-spark and its own catalog, for the catalog-table tests.

The in-memory catalog keeps its tables in ``spark.sql.warehouse.dir`` (a temporary directory);
the Delta jars are the ones ``make setup`` fetched (``pipelines.session.delta_spark_conf``),
so no Ivy download happens at test time. The session is
stopped when the fixture ends, so that ``pipelines.session.get_spark`` (which prefers an
active session) hands the embedded engine to every later test again.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Iterator

import pytest

__all__ = ["jvm_spark"]

_CONF = {
    "spark.sql.catalogImplementation": "in-memory",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="module")
def jvm_spark() -> Iterator[object]:
    """A classic ``SparkSession`` (local[2], Delta, in-memory catalog), one per test module."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The embedded engine's Connect client (earlier tests in this process) leaves these set;
    # with them pyspark's classic builder turns into a Connect client. Restored afterwards.
    saved = {v: os.environ.pop(v) for v in _CONNECT_ENV if v in os.environ}
    try:
        yield from _session()
    finally:
        os.environ.update(saved)


_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


def _session() -> Iterator[object]:
    from pyspark.sql import SparkSession

    from pipelines.config import EngineConfig
    from pipelines.session import delta_spark_conf, local_spark_conf

    with tempfile.TemporaryDirectory(prefix="binlake-warehouse-") as warehouse:
        builder = SparkSession.builder.master("local[2]").appName("binlake-tests")
        # binlake's local confs too: VACUUM lists files with 10,000 tasks by default (minutes
        # per table on a small lake).
        conf = {**delta_spark_conf(EngineConfig()), **local_spark_conf(), **_CONF,
                "spark.sql.warehouse.dir": warehouse}
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            yield spark
        finally:
            spark.stop()
