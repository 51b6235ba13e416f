"""Issue 44: a real Spark standalone cluster, binlogs on an object store.

A master and two workers (each its own JVM with one core, pyspark's ``bin/spark-class``,
``devtools/spark_cluster.py``) on loopback; the binlogs of a real MariaDB workload on a real
MinIO, which the executors' decoding tasks read themselves (``--binlog-dir s3://…``): no
binlog passes through the driver. ``conf/spark-submit.sh`` runs bronze → silver → quality →
gold → optimize on the cluster; silver replays the server's tables; gold holds every silver
row once. Then the embedded engine reads the same lake and extends it with the next file,
and silver still replays the server.

The lake itself is a local directory every process of this one-machine cluster shares: a
lake on the store from JVM Spark needs Hadoop's S3A connector and the AWS SDK in the JVM,
which binlake does not fetch (docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from devtools.mariadb import MariaDBServer
from devtools.minio import MinioServer
from devtools.mixed_workload import WORKLOAD_TABLES, run_mixed_workload
from devtools.spark_cluster import StandaloneCluster
from pipelines.lake.s3_client import S3Client, S3Settings
from tests.support.replay import replay_silver, server_tables

pytestmark = [pytest.mark.classic, pytest.mark.mariadb, pytest.mark.minio]

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--conf spark.sql.shuffle.partitions=4 --conf spark.databricks.delta.snapshotPartitions=2 "
         "--conf spark.ui.enabled=false --conf spark.log.level=WARN "
         "--conf spark.executor.memory=768m")


def _base_env(minio) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BINLAKE_", "AWS_")) and k not in ("SPARK_REMOTE",
                                                                   "SPARK_CONNECT_MODE_ENABLED")}
    return dict(env, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable, **minio.env())


def _upload(minio, bucket: str, files) -> None:
    client = S3Client(S3Settings.resolve(env=minio.env()), bucket)
    for f in files:
        client.put(f"binlogs/{f.name}", f.read_bytes(), content_type="application/octet-stream")


def _silver(lake: Path) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(lake / "silver" / "binlog_events")).to_pyarrow_table().to_pylist()


def _binlake(env: dict, lake: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc.stdout


def test_spark_submit_on_a_standalone_cluster_with_binlogs_on_minio(tmp_path: Path) -> None:
    import pyspark

    lake = tmp_path / "lake"
    with MinioServer() as minio, MariaDBServer() as source, MariaDBServer() as gold:
        bucket = minio.make_bucket()
        url = f"s3://{bucket}/binlogs"
        env = _base_env(minio)
        with source.connect() as conn:
            summary = run_mixed_workload(conn, alter_mid_stream=False)
        source.flush_logs()
        # the lake begins on the embedded engine: the schema snapshot (names JSON columns)
        _binlake(env, lake, "snapshot", "--source-dsn", source.dsn(), "--schemas", "shop,ops")
        files = source.binlog_files()
        _upload(minio, bucket, files[:-2])  # the last two are the next run's

        jars = Path(sys.prefix) / "delta-jars"
        submit_env = dict(env, SPARK_HOME=str(Path(pyspark.__file__).parent),
                          PYTHON=sys.executable, DELTA_JARS=str(jars),
                          SPARK_SUBMIT_EXTRA=SMALL, BINLAKE_GOLD_DSN=gold.dsn("binlake_gold"))
        submit_env["PATH"] = f"{submit_env['SPARK_HOME']}/bin:{submit_env['PATH']}"
        with StandaloneCluster(2, cores=1, memory="1g", env=env) as cluster:
            submit_env["SPARK_MASTER"] = cluster.url
            proc = subprocess.run(["sh", str(ROOT / "conf" / "spark-submit.sh"), str(lake), url],
                                  capture_output=True, text=True, env=submit_env, cwd=tmp_path,
                                  timeout=3600)
            assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-5000:],
                                          cluster.logs())
            with urllib.request.urlopen(f"http://127.0.0.1:{cluster.web_port}/json/") as r:
                apps = json.load(r)["completedapps"]
        out = proc.stdout
        assert minio.secret not in out + proc.stderr
        assert "quality: PASSED" in out, out
        # five applications (bronze, silver, quality, gold, optimize), each on both workers
        assert len(apps) == 5 and all(a["cores"] == 2 for a in apps), apps
        silver = _silver(lake)
        n = gold.execute("SELECT count(*) FROM binlake_gold.binlog_events")[0][0]
        assert n == len(silver) > 0

        # the embedded engine reads the cluster's lake and indexes the next file into it
        _upload(minio, bucket, files[-2:])
        _binlake(env, lake, "index", "--binlog-dir", url, "--all")
        silver = _silver(lake)
        assert len(silver) == summary.total_row_changes
        with source.connect() as conn:
            assert replay_silver(silver, conn, WORKLOAD_TABLES) == server_tables(
                conn, WORKLOAD_TABLES)
