"""A whole lake on an object store: ``binlake --lake s3://bucket/prefix`` on a real MinIO.

Real ``python -m pipelines.cli.main`` processes with the embedded engine (Sail) write bronze and
silver of the shipped samples into MinIO; two ``binlake silver`` started at the same moment
leave every row once (the object-store lease, ``pipelines/lake/lease_s3.py``); ``binlake status``
names a holder; a truncated data file on the store is found before anything is written and
``binlake repair`` then the re-runs it prints restore every row once.
The tables are read back with delta-rs straight from the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from devtools.minio import MinioServer
from pipelines.lake.s3_client import S3Client, S3Settings
from tests.support.lake_runs import KEY, ROOT, SAMPLE_FILES, SAMPLES

pytestmark = [pytest.mark.minio, pytest.mark.spark]

SAMPLE_ROW_CHANGES = 340  # samples/binlogs/README.md
ROUNDS = 2


@pytest.fixture(scope="module")
def minio():
    with MinioServer() as server:
        yield server


@pytest.fixture(scope="module")
def bucket(minio) -> str:
    return minio.make_bucket()


def _env(minio) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BINLAKE_", "AWS_")) and k not in ("SPARK_CONNECT_MODE_ENABLED",
                                                                   "SPARK_REMOTE")}
    # Credentials and endpoint as a user gives them; AWS_ALLOW_HTTP is binlake's to set.
    return dict(env, PYTHONPATH=str(ROOT), **minio.env())


def _start(minio, cwd: Path, root: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli.main", "--lake", root,
                             "--wait", "600", *args], cwd=cwd, env=_env(minio), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(minio, cwd: Path, root: str, *args: str) -> tuple[int, str, str]:
    proc = _start(minio, cwd, root, *args)
    out, err = proc.communicate(timeout=900)
    assert minio.secret not in out + err, "the secret key was printed"
    return proc.returncode, out, err


def _rows(minio, url: str, cols: list[str]) -> list[tuple]:
    from deltalake import DeltaTable

    opts = dict(minio.env(), AWS_ALLOW_HTTP="true")
    table = DeltaTable(url, storage_options=opts).to_pyarrow_table(columns=cols)
    return list(zip(*(table.column(c).to_pylist() for c in cols)))


def _table_ids(minio, bucket: str, key: str) -> set[str]:
    client = S3Client(S3Settings.resolve(env=minio.env()), bucket)
    ids = set()
    for k in client.list(f"{key}/_delta_log/"):
        if k.endswith(".json"):
            for line in client.get(k)[0].decode().splitlines():
                action = json.loads(line)
                if "metaData" in action:
                    ids.add(action["metaData"]["id"])
    return ids


def _bronze(minio, cwd: Path, root: str) -> None:
    rc, out, err = _run(minio, cwd, root, "bronze", "--binlog-dir", str(SAMPLES), "--all")
    assert rc == 0, out + err
    keys = _rows(minio, f"{root}/bronze/binlog_events", KEY + ["event_type"])
    assert len(keys) == len({k[:4] for k in keys}), "a bronze key appears twice"
    assert sum(k[4] in ("INSERT", "UPDATE", "DELETE") for k in keys) == SAMPLE_ROW_CHANGES
    states = _rows(minio, f"{root}/bronze/files", ["binlog_file", "status", "updated_at"])
    latest = {}
    for name, status, at in sorted(states, key=lambda r: r[2]):
        latest[name] = status
    assert latest == {n: "completed" for n in SAMPLE_FILES}


def _silver_once(minio, bucket: str, root: str) -> int:
    bronze = {k[:4] for k in _rows(minio, f"{root}/bronze/binlog_events", KEY + ["event_type"])
              if k[4] in ("INSERT", "UPDATE", "DELETE")}
    silver = _rows(minio, f"{root}/silver/binlog_events", KEY)
    assert len(silver) == len(set(silver)), f"{len(silver) - len(set(silver))} duplicates"
    assert set(silver) == bronze
    assert len(_table_ids(minio, bucket, root.split("/", 3)[3] + "/silver/binlog_events")) == 1
    return len(silver)


def test_bronze_and_silver_of_the_samples_into_s3(minio, bucket, tmp_path) -> None:
    root = f"s3://{bucket}/lakes/{uuid.uuid4().hex[:8]}"
    _bronze(minio, tmp_path, root)
    rc, out, err = _run(minio, tmp_path, root, "silver")
    assert rc == 0, out + err
    assert f"{SAMPLE_ROW_CHANGES} row changes appended" in out and f"-> {root}/silver" in out
    assert _silver_once(minio, bucket, root) == SAMPLE_ROW_CHANGES
    assert sorted(os.listdir(tmp_path)) == [], "nothing of the lake was written locally"
    # A data file truncated on the store: the next run refuses before writing anything.
    client = S3Client(S3Settings.resolve(env=minio.env()), bucket)
    prefix = root.split("/", 3)[3]
    part = next(k for k in client.list(f"{prefix}/bronze/binlog_events/")
                if k.endswith(".parquet") and "mariadb-bin.000003" in k)
    client.put(part, client.get(part)[0][:64])
    rc, out, err = _run(minio, tmp_path, root, "silver")
    assert rc == 1 and "is damaged, nothing was written" in err, out + err
    assert "truncated" in err and "binlake bronze --files mariadb-bin.000003" in err
    # The documented repair, on the store: set it aside, re-index the file, re-run silver.
    rc, out, err = _run(minio, tmp_path, root, "repair")
    assert rc == 0 and f"{root}/_binlake/damaged/" in out, out + err
    assert "--files mariadb-bin.000003" in out and "binlake silver" in out, out
    assert _run(minio, tmp_path, root, "bronze", "--binlog-dir", str(SAMPLES),
                "--files", "mariadb-bin.000003")[0] == 0
    rc, out, err = _run(minio, tmp_path, root, "silver")
    assert rc == 0, out + err
    assert _silver_once(minio, bucket, root) == SAMPLE_ROW_CHANGES
    # The mirror's tables are found on the store by vacuum.
    rc, out, err = _run(minio, tmp_path, root, "mirror")
    assert rc == 0 and f"-> {root}/mirror/shop/orders" in out, out + err
    rc, out, err = _run(minio, tmp_path, root, "vacuum")
    assert rc == 0 and "vacuum: mirror/shop/orders:" in out and "mirror_state/tables" in out, err
    assert sorted(os.listdir(tmp_path)) == [], "nothing of the lake was written locally"


def test_two_silver_runs_at_once_on_s3_append_each_row_once(minio, bucket, tmp_path) -> None:
    for i in range(ROUNDS):
        root = f"s3://{bucket}/lakes/pair{i}-{uuid.uuid4().hex[:6]}"
        _bronze(minio, tmp_path, root)
        procs = [_start(minio, tmp_path, root, "silver") for _ in range(2)]
        res = [(p, *p.communicate(timeout=900)) for p in procs]
        assert all(p.returncode == 0 for p, _, _ in res), res
        appended = sorted(int(out.split(" row changes appended")[0].rsplit(" ", 1)[1])
                          for _, out, _ in res)
        assert appended == [0, SAMPLE_ROW_CHANGES], res
        assert _silver_once(minio, bucket, root) == SAMPLE_ROW_CHANGES


def test_two_bronze_runs_at_once_on_s3_decode_each_file_once(minio, bucket, tmp_path) -> None:
    root = f"s3://{bucket}/lakes/bronze-pair-{uuid.uuid4().hex[:6]}"
    args = ("bronze", "--binlog-dir", str(SAMPLES), "--all")
    procs = [_start(minio, tmp_path, root, *args) for _ in range(2)]
    res = [(p, *p.communicate(timeout=900)) for p in procs]
    assert all(p.returncode == 0 for p, _, _ in res), res
    decoded = sorted(line.split(":")[1].strip() for _, out, _ in res for line in out.splitlines()
                     if line.startswith("bronze: mariadb-bin.0") and ": completed" in line)
    assert decoded == SAMPLE_FILES, "each file decoded by exactly one of the two"
    keys = _rows(minio, f"{root}/bronze/binlog_events", KEY + ["event_type"])
    assert len(keys) == len({k[:4] for k in keys}), "a bronze key appears twice"
    assert sum(k[4] in ("INSERT", "UPDATE", "DELETE") for k in keys) == SAMPLE_ROW_CHANGES


_HOLD = """
import sys, time
from pipelines.config import load_config
from pipelines.lake.lease import lake_lease
cfg = load_config(env={}, overrides={"lake.root": sys.argv[1]})
with lake_lease(cfg, "bronze", "test holder of bronze"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_status_names_the_holder_on_s3(minio, bucket, tmp_path) -> None:
    root = f"s3://{bucket}/lakes/{uuid.uuid4().hex[:8]}"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, root], env=_env(minio), text=True,
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc, out, err = _run(minio, tmp_path, root, "status", "--format", "json")
        rc2, out2, err2 = _run(minio, tmp_path, root, "--wait", "1", "bronze",
                               "--binlog-dir", str(SAMPLES), "--all")
    finally:
        holder.kill()
        holder.wait()
    assert rc == 0, err
    status = json.loads(out)
    leases = {x["stage"]: x for x in status["leases"]}
    assert leases["bronze"]["state"] == "held" and leases["bronze"]["pid"] == holder.pid
    assert leases["bronze"]["command"] == "test holder of bronze" and status["lake"] == root
    assert rc2 == 75 and f"pid {holder.pid}" in err2 and f"{root}/_binlake/leases/bronze" in err2


@pytest.mark.mariadb
def test_stream_into_s3_then_silver_each_row_once(minio, bucket, tmp_path, monkeypatch) -> None:
    from devtools.mariadb import MariaDBServer
    from pipelines.stream.progress import read_live
    from tests.support.lake_runs import wait_for

    for name, value in minio.env().items():
        monkeypatch.setenv(name, value)
    root = f"s3://{bucket}/lakes/stream-{uuid.uuid4().hex[:6]}"
    live = f"{root}/bronze/stream_status/default.json"
    with MariaDBServer() as server:
        server.execute("CREATE DATABASE app")
        server.execute("CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
        env = dict(_env(minio), BINLAKE_SOURCE_DSN=server.dsn(),
                   BINLAKE_STREAM_BATCH_INTERVAL_MS="200", BINLAKE_STREAM_SILVER_LAG_SECONDS="1")
        stream = subprocess.Popen([sys.executable, "-m", "pipelines.cli.main", "--lake", root,
                                   "stream", "--server-id", "4545"], cwd=tmp_path, env=env,
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert wait_for(lambda: (read_live(live) or {}).get("state") == "running", 300, 0.3)
            for i in range(60):
                server.execute("INSERT INTO app.t VALUES (%s, %s)", (i, i))
            server.execute("UPDATE app.t SET v = v + 1 WHERE id < 10")
            assert wait_for(lambda: (read_live(live) or {}).get("row_changes", 0) >= 70, 300, 0.3)
        finally:
            stream.terminate()
            out, err = stream.communicate(timeout=300)
        assert stream.returncode == 0, err[-3000:]
        assert minio.secret not in out + err
    rc, out, err = _run(minio, tmp_path, root, "silver")
    assert rc == 0, out + err
    assert _silver_once(minio, bucket, root) == 70
    assert read_live(live)["state"] == "stopped"
    assert sorted(os.listdir(tmp_path)) == [], "nothing of the lake was written locally"
