"""The stream against a real MariaDB, in process: start-up refusals, purged binlogs (refused or
skipped and recorded), a killed replication connection, GTID mode, and ``stream_status``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pipelines.config import load_config
from pipelines.lake.tables import Lake
from pipelines.errors import SourceError
from pipelines.stream.checkpoint import load_latest
from pipelines.stream.job import run_stream
from pipelines.stream.status import render_stream_status, stream_status
from devtools.mariadb import MariaDBServer

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

KEY = ["binlog_file", "start_pos", "row_in_event"]


def _cfg(tmp_path: Path, name: str = "lake"):
    return load_config(env={}, overrides={"lake.root": str(tmp_path / name),
                                          "stream.batch_interval_ms": 100,
                                          "stream.silver_lag_seconds": 0})


def _insert(server: MariaDBServer, lo: int, hi: int) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for i in range(lo, hi):
            cur.execute("INSERT INTO g.t VALUES (%s, %s)", (i, f"v{i}"))


def _ids(spark, cfg) -> list[int]:
    rows = (spark.read.format("delta").load(cfg.table_path("bronze", "binlog_events"))
            .where("event_type = 'INSERT' AND table_name = 't'").collect())
    return sorted(int(r["row_after"][0]) for r in rows)


def _no_duplicates(spark, cfg) -> None:
    df = spark.read.format("delta").load(cfg.table_path("bronze", "binlog_events"))
    assert df.groupBy(*KEY).count().where("count > 1").count() == 0


@pytest.fixture
def server():
    with MariaDBServer(binlog_row_metadata="FULL") as s:
        s.execute("CREATE DATABASE g")
        s.execute("CREATE TABLE g.t (id INT PRIMARY KEY, v VARCHAR(20))")
        yield s


def test_refuses_statement_binlogs_and_missing_grants(spark, tmp_path: Path) -> None:
    with MariaDBServer(extra_options={"binlog-format": "STATEMENT"}) as s:
        with pytest.raises(SourceError, match="binlog_format"):
            run_stream(spark, _cfg(tmp_path), source_dsn=s.dsn(), server_id=99, stop_after=1)
        s.execute("CREATE USER 'reader'@'127.0.0.1' IDENTIFIED BY 'reader-pass-1'")
        s.execute("GRANT SELECT ON *.* TO 'reader'@'127.0.0.1'")
        dsn = f"mysql://reader:reader-pass-1@127.0.0.1:{s.port}/"
        with pytest.raises(SourceError, match="REPLICATION SLAVE") as info:
            run_stream(spark, _cfg(tmp_path), source_dsn=dsn, server_id=99, stop_after=1)
        assert "reader-pass-1" not in str(info.value)
        with pytest.raises(SourceError, match="server_id"):
            run_stream(spark, _cfg(tmp_path), source_dsn=s.dsn(), server_id=s.server_id,
                       stop_after=1)


def test_purged_binlogs_refused_or_skipped_and_recorded(spark, tmp_path: Path, server) -> None:
    cfg = _cfg(tmp_path)
    _insert(server, 0, 5)
    assert run_stream(spark, cfg, source_dsn=server.dsn(), server_id=99, stop_after=2) == 0
    assert _ids(spark, cfg) == list(range(5))
    assert stream_status(spark, cfg)["gaps"] == []
    server.flush_logs()
    _insert(server, 5, 10)  # in a file about to be purged: lost to the lake
    server.flush_logs()
    _insert(server, 10, 15)
    last = server.binlog_files()[-1].name
    deadline = time.monotonic() + 20
    while server.binlog_files()[0].name != last:  # InnoDB may still need a file for a moment
        assert time.monotonic() < deadline
        server.execute(f"PURGE BINARY LOGS TO '{last}'")
        time.sleep(0.1)
    with pytest.raises(SourceError, match="purged"):
        run_stream(spark, cfg, source_dsn=server.dsn(), server_id=99, gap_fill=False,
                   stop_after=2)
    assert run_stream(spark, cfg, source_dsn=server.dsn(), server_id=99, stop_after=2) == 0
    assert _ids(spark, cfg) == list(range(5)) + list(range(10, 15))
    _no_duplicates(spark, cfg)
    st = stream_status(spark, cfg)
    assert len(st["gaps"]) == 1 and "purged" in st["gaps"][0]["reason"]
    assert st["position"] == "{}:{}".format(*server.execute("SHOW MASTER STATUS")[0][:2])
    assert st["state"] == "stopped"
    text = "\n".join(render_stream_status(st))
    assert "GAP:" in text and "checkpoint #" in text


def test_reconnects_after_the_dump_connection_is_killed(spark, tmp_path: Path, server) -> None:
    cfg = _cfg(tmp_path)
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(run_stream(
        spark, cfg, source_dsn=server.dsn(), server_id=99, stop_after=9)))
    t.start()
    _insert(server, 0, 20)
    deadline = time.monotonic() + 20
    dumps: list = []
    while not dumps and time.monotonic() < deadline:
        dumps = [r[0] for r in server.execute("SHOW PROCESSLIST") if r[4] == "Binlog Dump"]
        time.sleep(0.1)
    assert dumps
    time.sleep(1.5)
    # Kill the dump while a transaction is being written, then keep writing.
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO g.t VALUES (1000, 'x')")
        server.execute(f"KILL {dumps[0]}")
        cur.execute("INSERT INTO g.t VALUES (1001, 'y')")
        cur.execute("COMMIT")
    _insert(server, 20, 40)
    t.join(60)
    assert codes == [0]
    assert _ids(spark, cfg) == list(range(40)) + [1000, 1001]
    _no_duplicates(spark, cfg)


def test_gtid_mode_start_and_resume(spark, tmp_path: Path, server) -> None:
    cfg = _cfg(tmp_path)
    _insert(server, 0, 3)
    gtid = str(server.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0])
    _insert(server, 3, 6)
    assert run_stream(spark, cfg, source_dsn=server.dsn(), server_id=99, start_gtid=gtid,
                      stop_after=2) == 0
    assert _ids(spark, cfg) == [3, 4, 5]
    ck = load_latest(spark, Lake.of(cfg), "default")
    assert ck.mode == "gtid" and ck.gtid == str(server.execute(
        "SELECT @@GLOBAL.gtid_binlog_pos")[0][0])
    server.flush_logs()
    _insert(server, 6, 9)
    # The saved checkpoint wins over start flags.
    assert run_stream(spark, cfg, source_dsn=server.dsn(), server_id=99, start_gtid=gtid,
                      stop_after=2) == 0
    assert _ids(spark, cfg) == list(range(3, 9))
    _no_duplicates(spark, cfg)
