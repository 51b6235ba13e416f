"""The same transforms on real Apache Spark (pyspark classic, local[2]) and on Sail.

Bronze's transform is ``decode_files`` (+ ``filter_tables``): a DataFrame of file paths →
bronze rows through ``mapInArrow``. Run on both engines over real corpus files, the results
must be identical, row for row and value for value.
"""

from __future__ import annotations

import os

import pytest

from pipelines.bronze.job import TASKS_DDL, decode_files, filter_tables
from pipelines.config import load_config
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture

pytestmark = [pytest.mark.spark, pytest.mark.classic]

FILES = [
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32",
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-none",
    "blackbeam__rust_mysql_common/test-data__binlogs__json.binlog.000001",
    "blackbeam__rust_mysql_common/test-data__binlogs__mysql-enum-string-set.000001",
    "zalora__binlog-parser/data__fixtures__mysql-bin.01",
]
SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "binlogs")


@pytest.fixture(scope="module")
def classic(jvm_spark):  # noqa: F811
    """A local JVM Spark (the transform is pure; the session is the one every classic test
    shares, so the process's JVM has the Delta jars whichever module launches it)."""
    return jvm_spark


def _run(session, paths: list[str], cfg, tables=None, chunks: int = 1,
         compiled: bool = False):
    rows = [(p, "conformance", c, chunks) for p in paths for c in range(chunks)]
    tasks = session.createDataFrame(rows, TASKS_DDL).repartition(2)
    df = filter_tables(decode_files(tasks, cfg, compiled), None, tables)
    rows = df.collect()
    # Rows as plain tuples, bytes normalised (classic returns bytearray), in binlog order.
    def norm(v):
        if isinstance(v, (bytes, bytearray)):
            return bytes(v)
        if isinstance(v, list):
            return tuple(norm(x) for x in v)
        return v
    out = [tuple(norm(r[c]) for c in df.columns) for r in rows]
    return sorted(out, key=lambda t: (t[3], t[4], t[6], t[8]))


def test_decode_files_identical_on_classic_spark_and_sail(spark, classic, corpus) -> None:
    paths = [str(corpus / f) for f in FILES]
    paths += sorted(os.path.abspath(os.path.join(SAMPLES, f)) for f in os.listdir(SAMPLES)
                    if f.startswith("mariadb-bin."))
    cfg = load_config(env={})
    on_sail = _run(spark, paths, cfg)
    on_classic = _run(classic, paths, cfg)
    assert len(on_sail) > 400
    assert on_sail == on_classic
    # Rows decoded by the compiled loop, in classic Spark's Python workers: the same rows.
    assert _run(classic, paths, cfg, compiled=True) == on_sail


def test_table_filter_identical(spark, classic) -> None:
    paths = sorted(os.path.abspath(os.path.join(SAMPLES, f)) for f in os.listdir(SAMPLES)
                   if f.startswith("mariadb-bin."))
    cfg = load_config(env={})
    a = _run(spark, paths, cfg, tables=["shop.orders"])
    b = _run(classic, paths, cfg, tables=["shop.orders"])
    assert a == b and {r[13] for r in a if r[8] in ("INSERT", "UPDATE", "DELETE")} == {"orders"}


def test_chunked_decoding_identical(spark, classic) -> None:
    paths = [os.path.abspath(os.path.join(SAMPLES, "mariadb-bin.000003"))]
    cfg = load_config(env={})
    a = _run(spark, paths, cfg, chunks=3)
    b = _run(classic, paths, cfg, chunks=3)
    assert a == b and sum(1 for r in a if r[8] == "END") == 3
