"""A local JVM Spark with delta-spark and its own catalog, for the tests on classic Spark.

The in-memory catalog keeps its tables in ``spark.sql.warehouse.dir`` (a temporary directory);
the Delta jars are the ones ``make setup`` fetched (``pipelines.engine.session.delta_spark_conf``),
so no Ivy download happens at test time. The session is
stopped when the fixture ends, so that ``pipelines.engine.session.get_spark`` (which prefers an
active session) hands the embedded engine to every later test again.

pyspark launches one JVM per Python process and keeps it after ``stop()``: the classpath is
the first launch's. Every classic session in the tests comes from here, so whichever module
launches it, the JVM has the Delta jars. The launch forks a process that runs the embedded
engine's gRPC threads; it has been seen to exit before reporting its port (CI, stop 26), so
a failed launch is tried once more.
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
    "spark.api.mode": "classic",
}


@pytest.fixture(scope="module")
def jvm_spark() -> Iterator[object]:
    """A classic ``SparkSession`` (local[2], Delta, in-memory catalog), one per test module."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    # The embedded engine's Connect client (earlier tests in this process) leaves these set;
    # with them pyspark's classic builder turns into a Connect client. Restored afterwards.
    saved = {v: os.environ.pop(v) for v in _CONNECT_ENV if v in os.environ}
    try:
        yield from _session()
    finally:
        os.environ.update(saved)


_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


def _session() -> Iterator[object]:
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    from pipelines.config import EngineConfig
    from pipelines.engine.session import delta_spark_conf, local_spark_conf

    with tempfile.TemporaryDirectory(prefix="binlake-warehouse-") as warehouse:
        builder = SparkSession.builder.master("local[2]").appName("binlake-tests")
        # binlake's local confs too: VACUUM lists files with 10,000 tasks by default (minutes
        # per table on a small lake).
        conf = {**delta_spark_conf(EngineConfig()), **local_spark_conf(), **_CONF,
                "spark.sql.warehouse.dir": warehouse}
        for key, value in conf.items():
            builder = builder.config(key, value)
        try:
            spark = builder.getOrCreate()
        except PySparkRuntimeError as exc:
            if exc.getCondition() != "JAVA_GATEWAY_EXITED":
                raise
            spark = builder.getOrCreate()
        try:
            yield spark
        finally:
            spark.stop()
