"""``delta_log`` reads the files a table lists from its own log (the checkpoint's add actions
and the commits after it), for ``lake_check`` and bronze; delta-rs, which parses every
file's statistics besides, is the referee, and takes over where the log needs more."""

from __future__ import annotations

import json
import os
from urllib.parse import unquote

import pytest

from pipelines.lake import check as lake_check
from pipelines.lake.delta_log import read_log
from pipelines.lake.check import table_faults


def _listed(path: str, storage: object | None = None) -> list[tuple[str, int, str | None]] | None:
    log = read_log(path, storage)
    return None if log.files is None else [(f.path, f.size, f.partition.get("binlog_file"))
                                           for f in log.files]


def _norm(files) -> list[tuple[str, int, str | None]]:
    return sorted((unquote(r), s, b) for r, s, b in files)


@pytest.fixture()
def partitioned(spark, tmp_path) -> str:
    """A table partitioned like bronze, past its checkpoint at version 10, with files
    removed before and after it (DELETE of a partition, an overwrite of another)."""
    path = str(tmp_path / "t")
    ddl = "binlog_file string, n bigint"
    for i in range(12):  # versions 0..11
        (spark.createDataFrame([(f"mariadb-bin.{i % 4:06d}", i)], ddl).write.format("delta")
         .mode("append").partitionBy("binlog_file").save(path))
        if i == 6:  # version 7
            spark.sql(f"DELETE FROM delta.`{path}` WHERE binlog_file = 'mariadb-bin.000001'")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE binlog_file = 'mariadb-bin.000002'")
    (spark.createDataFrame([("mariadb-bin.000003", 99)], ddl).write.format("delta")
     .mode("overwrite").option("replaceWhere", "binlog_file = 'mariadb-bin.000003'")
     .save(path))
    assert os.path.exists(os.path.join(path, "_delta_log", "_last_checkpoint"))
    return path


def test_the_log_lists_what_delta_rs_lists(partitioned):
    from deltalake import DeltaTable

    got = _listed(partitioned)
    assert got is not None
    assert _norm(got) == _norm(lake_check._listed_by_delta_rs(partitioned))
    assert len(got) == len(DeltaTable(partitioned).file_uris()) >= 3
    assert {b for _, _, b in got} == {"mariadb-bin.000000", "mariadb-bin.000001",
                                      "mariadb-bin.000003"}


def test_a_file_listed_by_the_checkpoint_only_is_checked(partitioned):
    last = json.load(open(os.path.join(partitioned, "_delta_log", "_last_checkpoint")))
    first = next(r for r, _, b in _listed(partitioned) if b == "mariadb-bin.000000")
    full = os.path.join(partitioned, unquote(first))
    assert os.path.getmtime(full) < os.path.getmtime(os.path.join(
        partitioned, "_delta_log", f"{last['version']:020d}.checkpoint.parquet"))
    with open(full, "r+b") as fh:
        fh.truncate(10)
    (fault,) = table_faults(partitioned, "bronze/binlog_events")
    assert fault["kind"] == "data_file" and fault["binlog_file"] == "mariadb-bin.000000"
    assert "has 10 of its" in fault["problem"]


def test_where_the_log_needs_more_delta_rs_reads_it(partitioned, monkeypatch):
    log_dir = os.path.join(partitioned, "_delta_log")
    last_file = os.path.join(log_dir, "_last_checkpoint")
    last = json.load(open(last_file))
    # a multi-part checkpoint
    json.dump(dict(last, parts=2), open(last_file, "w"))
    assert _listed(partitioned) is None
    json.dump(last, open(last_file, "w"))
    # a checkpoint that is not there
    os.rename(os.path.join(log_dir, f"{last['version']:020d}.checkpoint.parquet"),
              os.path.join(log_dir, "aside.parquet"))
    assert _listed(partitioned) is None
    delta_rs = []
    real = lake_check._listed_by_delta_rs
    monkeypatch.setattr(lake_check, "_listed_by_delta_rs",
                        lambda p: delta_rs.append(p) or real(p))
    faults = table_faults(partitioned, "bronze/binlog_events")
    assert delta_rs == [partitioned]
    assert [f["kind"] for f in faults] == ["unreadable"]  # delta-rs cannot load it either


def test_a_commit_missing_after_the_checkpoint_is_not_replayed_around(partitioned):
    log_dir = os.path.join(partitioned, "_delta_log")
    last = json.load(open(os.path.join(log_dir, "_last_checkpoint")))
    gone = os.path.join(log_dir, f"{last['version'] + 1:020d}.json")
    os.remove(gone)
    assert _listed(partitioned) is None


@pytest.mark.minio
def test_the_log_of_a_table_on_an_object_store(partitioned, monkeypatch):
    """The same table copied to a real MinIO: its checkpoint and commits are read from the
    store, and a data file cut short there is named."""
    from devtools.minio import MinioServer
    from pipelines.lake.s3_client import S3Client, S3Settings

    with MinioServer() as minio:
        for k, v in minio.env().items():
            monkeypatch.setenv(k, v)
        bucket = minio.make_bucket()
        client = S3Client(S3Settings.resolve(env=minio.env()), bucket)
        for d, _, names in os.walk(partitioned):
            for name in names:
                rel = os.path.relpath(os.path.join(d, name), partitioned)
                client.put(f"t/{rel}", open(os.path.join(d, name), "rb").read())
        url = f"s3://{bucket}/t"
        assert read_log(url).checkpoint >= 10
        on_store = _listed(url)
        assert on_store is not None and _norm(on_store) == _norm(_listed(partitioned))
        assert table_faults(url, "bronze/binlog_events") == []
        rel = next(r for r, _, b in on_store if b == "mariadb-bin.000000")
        client.put(f"t/{unquote(rel)}", b"PAR1")
        (fault,) = table_faults(url, "bronze/binlog_events")
        assert fault["binlog_file"] == "mariadb-bin.000000" and "has 4 of its" in fault["problem"]
