"""Acceptance of the bronze stage against a real MariaDB server and its own tool.

A throwaway MariaDB 10.11 runs the mixed workload (every common type, unsigned extremes,
multi-row statements, a 200-row transaction, NULLs, rotations into several files). Bronze,
built by ``binlake bronze --all`` on the embedded engine, must hold exactly the row changes
``mariadb-binlog -vv`` prints: same files, positions, GTIDs, tables, kinds and values.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from tests.support.binlog_verbose import read_row_changes
from devtools.mariadb import MariaDBServer
from tests.support.scenarios import assert_bronze_equals_reference as _compare
from tests.support.scenarios import bronze_rows as _bronze_rows
from devtools.mixed_workload import run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"


@pytest.fixture(scope="module")
def server_binlogs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("server-binlogs")
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        with server.connect() as conn:
            summary = run_mixed_workload(conn)
        server.flush_logs()
        files = server.binlog_files()
        assert len(files) >= 4 and summary.total_row_changes >= 300
        for f in files:
            shutil.copy(f, out / f.name)
    return out


@pytest.mark.parametrize("compiled_min_mb", [96, 0], ids=["python", "compiled"])
def test_bronze_equals_mariadb_binlog_on_server_workload(spark, server_binlogs: Path,
                                                          tmp_path: Path,
                                                          compiled_min_mb: int) -> None:
    # "compiled": rows decoded by the compiled loop (bronze.compiled_min_mb = 0), "python":
    # by the Python decoders (these files are far below the default 48 MB).
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                         "bronze.compiled_min_mb": compiled_min_mb})
    res = run_bronze(spark, cfg, binlog_dir=str(server_binlogs), all_files=True)
    # The last file was copied while the server was still writing it.
    assert [f.status for f in res.files] == ["completed"] * (len(res.files) - 1) + ["partial"]
    reference = [rc for f in sorted(server_binlogs.iterdir()) for rc in read_row_changes(f)]
    assert res.row_changes == len(reference) >= 300
    # The 200-row transaction is one GTID holding 200+ row changes.
    per_gtid: dict[str, int] = {}
    for rc in reference:
        per_gtid[rc.gtid] = per_gtid.get(rc.gtid, 0) + 1
    assert max(per_gtid.values()) >= 200
    _compare(_bronze_rows(spark, tmp_path / "lake"), reference)


def test_bronze_equals_mariadb_binlog_on_shipped_samples(spark, tmp_path: Path) -> None:
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), all_files=True)
    reference = [rc for f in sorted(SAMPLES.glob("*.0*")) for rc in read_row_changes(f)]
    _compare(_bronze_rows(spark, tmp_path / "lake"), reference)


def test_mariadb_compressed_binlog_equals_mariadb_binlog(spark, tmp_path: Path) -> None:
    """log_bin_compress=ON: QUERY_COMPRESSED and *_ROWS_COMPRESSED events from a real server."""
    out = tmp_path / "compressed"
    out.mkdir()
    with MariaDBServer(extra_options={"log_bin_compress": "ON",
                                      "log_bin_compress_min_len": 10}) as server:
        with server.connect() as conn:
            run_mixed_workload(conn)
        server.flush_logs()
        for f in server.binlog_files():
            shutil.copy(f, out / f.name)
    types = set()
    from pipelines.binlog.reader import BinlogFileReader

    for f in sorted(out.iterdir()):
        types |= {e.header.type_code for e in BinlogFileReader(str(f))}
    assert {165, 169} & types or {165, 166} & types, f"no compressed events: {sorted(types)}"
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    res = run_bronze(spark, cfg, binlog_dir=str(out), all_files=True)
    assert not res.failed
    reference = [rc for f in sorted(out.iterdir()) for rc in read_row_changes(f)]
    assert res.row_changes == len(reference) >= 300
    _compare(_bronze_rows(spark, tmp_path / "lake"), reference)
