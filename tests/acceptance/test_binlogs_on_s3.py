"""Issue 44: binlogs on an object store, read in place (``--binlog-dir s3://bucket/prefix``).

A real MinIO holds the binlogs; ``binlake index`` (a process of its own, the embedded
engine, decoding in worker processes) lists them there and each decoding task reads its
file's byte ranges from the store itself. Bronze and silver equal those of the same files
indexed from a local directory (names, sizes, positions, every value), a file split among
tasks included; a missing object, or one that is not a binlog, is a clear error naming it;
a truncated object is its own file's problem only (partial), and the secret key is never printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from devtools.mariadb import MariaDBServer
from devtools.minio import MinioServer
from devtools.random_workload import run_random_workload
from pipelines.lake.s3_client import S3Client, S3Settings
from tests.support.lake_runs import ROOT, SAMPLE_FILES, SAMPLES

pytestmark = [pytest.mark.minio, pytest.mark.spark]


@pytest.fixture(scope="module")
def minio():
    with MinioServer() as server:
        yield server


def _client(minio, bucket: str) -> S3Client:
    return S3Client(S3Settings.resolve(env=minio.env()), bucket)


def _upload(minio, bucket: str, prefix: str, files: list[Path]) -> str:
    client = _client(minio, bucket)
    for f in files:
        client.put(f"{prefix}/{f.name}", f.read_bytes(), content_type="application/octet-stream")
    return f"s3://{bucket}/{prefix}"


def _binlake(minio, lake: Path, *args: str, env: dict | None = None) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("BINLAKE_", "AWS_")) and k not in ("SPARK_CONNECT_MODE_ENABLED",
                                                                   "SPARK_REMOTE")}
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake), *args],
                          cwd=ROOT, env=dict(base, PYTHONPATH=str(ROOT), **minio.env(),
                                             **(env or {})),
                          capture_output=True, text=True, timeout=900)
    assert minio.secret not in proc.stdout + proc.stderr, "the secret key was printed"
    return proc.returncode, proc.stdout, proc.stderr


def _table(lake: Path, stage: str) -> pa.Table:
    from deltalake import DeltaTable

    t = DeltaTable(str(lake / stage / "binlog_events")).to_pyarrow_table()
    keys = [c for c in ("binlog_file", "start_pos", "row_in_event", "event_type")
            if c in t.column_names]
    return t.sort_by([(k, "ascending") for k in keys])


def _assert_same(local: Path, remote: Path) -> None:
    for stage in ("bronze", "silver"):
        a, b = _table(local, stage), _table(remote, stage)
        assert a.num_rows == b.num_rows > 0, stage
        for c in a.column_names:
            assert a.column(c).equals(b.column(c)), f"{stage}.{c}: local and s3:// differ"


def test_the_samples_index_from_the_store_as_from_a_directory(minio, tmp_path: Path) -> None:
    bucket = minio.make_bucket()
    url = _upload(minio, bucket, "archive/binlogs", [SAMPLES / n for n in SAMPLE_FILES])
    _upload(minio, bucket, "archive/binlogs", [ROOT / "README.md"])  # not a binlog: left out
    code, out, err = _binlake(minio, tmp_path / "s3lake", "index", "--binlog-dir", url, "--all")
    assert code == 0, err
    for name in SAMPLE_FILES:
        assert f"bronze: {name}: completed" in out
    assert "README" not in out
    code, out, err = _binlake(minio, tmp_path / "local", "index", "--binlog-dir", str(SAMPLES),
                              "--all")
    assert code == 0, err
    _assert_same(tmp_path / "local", tmp_path / "s3lake")
    # a re-run reads the listing, finds every file completed at its size: nothing redone
    code, out, err = _binlake(minio, tmp_path / "s3lake", "bronze", "--binlog-dir", url, "--all")
    assert code == 0 and out.count("already completed, skipped") == len(SAMPLE_FILES), out


def test_a_file_split_among_tasks_reads_its_own_ranges(minio, tmp_path: Path) -> None:
    """One 6 MB file of a random workload, split into 1 MB chunks (``bronze.min_chunk_mb``),
    decoded in worker processes that each read their chunk's ranges from the store."""
    d = tmp_path / "binlogs"
    d.mkdir()
    with MariaDBServer(max_binlog_size=1 << 30) as server:
        with server.connect() as conn:
            run_random_workload(conn, 6 << 20, seed=4404, tables=2)
        server.flush_logs()
        for f in server.binlog_files():
            shutil.copy(f, d / f.name)
    bucket = minio.make_bucket()
    url = _upload(minio, bucket, "b", sorted(d.iterdir()))
    env = {"BINLAKE_BRONZE_MIN_CHUNK_MB": "1", "BINLAKE_BRONZE_COMMIT_MB": "2",
           "BINLAKE_BRONZE_INLINE_MAX_MB": "0"}
    for lake, where in ((tmp_path / "s3lake", url), (tmp_path / "local", str(d))):
        code, out, err = _binlake(minio, lake, "index", "--binlog-dir", where, "--all", env=env)
        assert code == 0, err
    _assert_same(tmp_path / "local", tmp_path / "s3lake")


def test_missing_and_damaged_objects_are_clear_errors(minio, tmp_path: Path) -> None:
    bucket = minio.make_bucket()
    first, second = SAMPLE_FILES[0], SAMPLE_FILES[1]
    url = _upload(minio, bucket, "logs", [SAMPLES / first])
    code, out, err = _binlake(minio, tmp_path / "lake", "bronze", "--binlog-dir", url,
                              "--files", "mariadb-bin.000099")
    assert code != 0 and f"{url}/mariadb-bin.000099 does not exist" in err
    assert "Traceback" not in err
    # a truncated copy of the second file: that file alone is partial (exit 1); the
    # first still indexes
    data = (SAMPLES / second).read_bytes()
    _client(minio, bucket).put(f"logs/{second}", data[:len(data) // 2],
                               content_type="application/octet-stream")
    code, out, err = _binlake(minio, tmp_path / "lake", "bronze", "--binlog-dir", url, "--all")
    assert code == 1, out + err
    assert f"bronze: {first}: completed" in out
    assert f"bronze: {second}: partial," in out and "where the file is cut short" in out
    code, _, err = _binlake(minio, tmp_path / "lake", "bronze", "--binlog-dir",
                            f"s3://no-such-bucket-{os.getpid()}/x", "--all")
    assert code != 0 and "no-such-bucket" in err and "Traceback" not in err
