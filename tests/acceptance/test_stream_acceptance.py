"""Issue 5's acceptance: ``binlake stream`` follows a live MariaDB exactly once across a SIGKILL.

A throwaway MariaDB 10.11 runs, concurrently, the type-heavy mixed workload (with an ALTER
mid-stream and three binlog rotations) and a ticker: small multi-statement transactions of
inserts, updates and deletes on a table of its own. ``python -m pipelines.stream`` follows the
server as a subprocess; it is SIGKILLed in the middle of the workload, restarted, and stopped
with SIGTERM once the workload is over and the stream has caught up. Then:

- silver (``run_silver``) replays every table exactly to the server's final contents;
- no (binlog_file, start_pos, row_in_event) appears twice in bronze or silver;
- every streamed row change and statement equals what file mode (``run_bronze``) makes of the
  server's binlog files, column for column, positions included.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.lake.tables import Lake
from pipelines.silver.job import KEY, run_silver
from pipelines.stream.checkpoint import load_latest
from pipelines.stream.progress import live_path, read_live
from devtools.mariadb import MariaDBServer
from tests.support.bronze_maps import FACTS
from tests.support.replay import replay_silver, server_tables
from tests.support.tcp_gate import TcpGate
from devtools.mixed_workload import WORKLOAD_TABLES, run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

ROOT = Path(__file__).resolve().parents[2]
TICKS = "feed.ticks"
TICKS_DDL = """
    CREATE TABLE feed.ticks (
      id INT NOT NULL PRIMARY KEY,
      n BIGINT UNSIGNED NULL,
      amount DECIMAL(12,4) NULL,
      ratio DOUBLE NULL,
      label VARCHAR(40) CHARACTER SET utf8mb4 NULL,
      at DATETIME(6) NULL,
      doc JSON NULL,
      raw VARBINARY(16) NULL
    ) ENGINE=InnoDB"""
COMPARED = ["server_id", "binlog_file", "start_pos", "end_pos", "row_in_event", "event_timestamp",
            "event_type", "gtid", "trx_pos", "connection_id", "schema_name", "table_name",
            "table_id", "column_count", "column_types", "column_meta", "column_nullable",
            "column_names", "column_unsigned", "column_charsets", "primary_key", "enum_values",
            "set_values", "row_before", "row_after", "before_present", "after_present", "query",
            "table_map_hash"]
# The TABLE_MAP facts row changes name (each task writes its own copy: compared distinct):
# tests.support.bronze_maps.FACTS.


def _ticker(server: MariaDBServer, stop: threading.Event, done: list[int]) -> None:
    """Small transactions (1-4 statements) until ``stop``; ids cycle so rows are updated and
    deleted while others are inserted."""
    conn = server.connect(autocommit=False)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")
    i = 0
    while not stop.is_set():
        i += 1
        cur.execute("INSERT INTO feed.ticks VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (i, 2 ** 64 - i, f"{i * 7 % 100000}.{i % 10000:04d}", i / 7.0,
                     f"tick {i} é\U0001F600", f"2024-01-01 00:00:{i % 60:02d}.{i:06d}"[:26],
                     json.dumps({"i": i, "tags": ["a", i % 3]}),
                     i.to_bytes(4, "big") + b"\x00\xff"))
        if i % 3 == 0:
            cur.execute("UPDATE feed.ticks SET n = n - 1, label = CONCAT(label, '|u'), "
                        "doc = JSON_SET(doc, '$.u', %s) WHERE id = %s", (i, i - 1))
        if i % 5 == 0:
            cur.execute("DELETE FROM feed.ticks WHERE id = %s", (i - 3,))
        if i % 7 == 0:
            cur.execute("UPDATE feed.ticks SET amount = -amount WHERE id BETWEEN %s AND %s",
                        (i - 6, i))
        conn.commit()
        done[0] = i
        time.sleep(0.005)
    cur.close()
    conn.close()


def _start_stream(lake: Path, server: MariaDBServer, log: Path,
                  port: int | None = None, lag: int = 2) -> subprocess.Popen:
    """``python -m pipelines.stream`` following ``server`` (through ``port`` when given;
    silver following every ``lag`` seconds, 0: never)."""
    dsn = server.dsn()
    if port is not None:
        dsn = dsn.replace(f":{server.port}/", f":{port}/")
    env = dict(os.environ, BINLAKE_SOURCE_DSN=dsn,  # not on the command line
               BINLAKE_STREAM_BATCH_INTERVAL_MS="200",
               BINLAKE_STREAM_SILVER_LAG_SECONDS=str(lag), PYTHONPATH=str(ROOT))
    env.pop("BINLAKE_CONF", None)
    return subprocess.Popen([sys.executable, "-m", "pipelines.stream", "--lake", str(lake), "-v",
                             "--server-id", "4242"], cwd=ROOT, env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _wait(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None,
          log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"stream exited ({proc.returncode}) while waiting for {what}:\n"
                        + (log.read_text()[-3000:] if log else ""))
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}:\n" + (log.read_text()[-3000:] if log else ""))


def _live(lake: Path) -> dict:
    return read_live(live_path(str(lake), "default")) or {}


def _kill(proc: subprocess.Popen, spark, tables: Lake):
    """SIGKILL the stream; return the checkpoint it left."""
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    return load_latest(spark, tables, "default")


def _stop_at_the_end(proc: subprocess.Popen, lake: Path, server: MariaDBServer, log: Path,
                     stop: signal.Signals = signal.SIGTERM) -> int:
    """Wait for the stream to reach the server's end, send it ``stop``; its exit code."""
    end = server.execute("SHOW MASTER STATUS")[0][:2]
    _wait(lambda: (_live(lake).get("file"), _live(lake).get("pos")) == end, 60,
          f"the stream to reach {end[0]}:{end[1]}", proc, log)
    proc.send_signal(stop)
    return proc.wait(60)


def _replayed(spark, cfg, server: MariaDBServer, tables: list[str]) -> tuple[list, dict, dict]:
    """Run silver; return its rows, its replay of ``tables`` and the server's tables."""
    run_silver(spark, cfg)
    silver = [r.asDict() for r in spark.read.format("delta")
              .load(cfg.table_path("silver", "binlog_events")).collect()]
    with server.connect() as conn:
        return silver, replay_silver(silver, conn, tables), server_tables(conn, tables)


def _silver_rows(spark, cfg) -> int:
    from pipelines.lake.delta_ops import table_exists

    path = cfg.table_path("silver", "binlog_events")
    return spark.read.format("delta").load(path).count() if table_exists(spark, path) else 0


def _duplicates(spark, path: str) -> int:
    df = spark.read.format("delta").load(path)
    return df.groupBy(*KEY).count().where("count > 1").count()


def test_stream_sigkill_restart_sigterm_replays_exactly(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    log = tmp_path / "stream.log"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    bronze_path = cfg.table_path("bronze", "binlog_events")
    tables = Lake.of(cfg)
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        server.execute("CREATE DATABASE feed CHARACTER SET utf8mb4")
        server.execute(TICKS_DDL)
        proc = _start_stream(lake, server, log)
        try:
            _wait(lambda: _live(lake).get("state") == "running", 60, "the stream to run",
                  proc, log)
            stop, ticks = threading.Event(), [0]
            ticker = threading.Thread(target=_ticker, args=(server, stop, ticks), daemon=True)
            ticker.start()
            _wait(lambda: ticks[0] > 50, 30, "the ticker")
            tables_made = threading.Event()

            def after_ddl() -> None:
                tables_made.set()
                time.sleep(0.5)  # the SIGKILL lands here, with the ticker still writing

            result: dict = {}

            def workload() -> None:
                with server.connect() as conn:
                    result["summary"] = run_mixed_workload(conn, after_ddl=after_ddl,
                                                           alter_mid_stream=True)

            mixed = threading.Thread(target=workload, daemon=True)
            mixed.start()
            assert tables_made.wait(30)
            time.sleep(0.2)
            killed_at = _kill(proc, spark, tables)
            assert killed_at is not None, "nothing committed before the SIGKILL"

            proc = _start_stream(lake, server, log)
            mixed.join(60)
            assert "summary" in result
            # A second SIGKILL at an arbitrary moment of the ticker's load.
            _wait(lambda: _live(lake).get("pid") == proc.pid, 60, "the restarted stream", proc, log)
            time.sleep(random.Random(os.getpid()).uniform(0.5, 2.5))
            assert _kill(proc, spark, tables).seq >= killed_at.seq
            proc = _start_stream(lake, server, log)
            _wait(lambda: _live(lake).get("pid") == proc.pid, 60, "the restarted stream", proc, log)
            # The stream runs silver itself (lag 2 s; start-up, the lake check and the silver
            # lease add a few seconds, so wait for it rather than sleep a fixed time).
            _wait(lambda: _silver_rows(spark, cfg) > 0, 60, "the stream to run silver itself",
                  proc, log)
            stop.set()
            ticker.join(30)
            followed = _silver_rows(spark, cfg)
            end = server.execute("SHOW MASTER STATUS")[0][:2]
            assert _stop_at_the_end(proc, lake, server, log) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

        final = load_latest(spark, tables, "default")
        assert (final.file, final.pos) == (end[0], int(end[1]))
        assert final.seq > killed_at.seq
        assert _live(lake)["state"] == "stopped"
        assert _duplicates(spark, bronze_path) == 0
        assert followed > 0, "the stream did not run silver itself"

        run_silver(spark, cfg)
        silver_path = cfg.table_path("silver", "binlog_events")
        assert _duplicates(spark, silver_path) == 0
        silver = [r.asDict() for r in spark.read.format("delta").load(silver_path).collect()]
        tables = list(WORKLOAD_TABLES) + [TICKS]
        with server.connect() as conn:
            expected = server_tables(conn, tables)
            replayed = replay_silver(silver, conn, tables)
        for t in tables:
            assert replayed[t] == expected[t], f"{t}: silver replay differs from the server"
        assert len(expected[TICKS]) > 50

        # File mode over the same binlog files makes the same rows, positions included.
        binlogs = tmp_path / "binlogs"
        binlogs.mkdir()
        for f in server.binlog_files():
            shutil.copy(f, binlogs / f.name)
    file_cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "file-lake")})
    assert not run_bronze(spark, file_cfg, binlog_dir=str(binlogs), all_files=True).failed
    kinds = "event_type IN ('INSERT', 'UPDATE', 'DELETE', 'QUERY')"
    streamed = spark.read.format("delta").load(bronze_path).where(kinds).select(*COMPARED)
    indexed = (spark.read.format("delta").load(file_cfg.table_path("bronze", "binlog_events"))
               .where(kinds).select(*COMPARED))
    n = indexed.count()
    assert n > 1000 and streamed.count() == n
    assert streamed.exceptAll(indexed).count() == 0
    assert indexed.exceptAll(streamed).count() == 0
    maps = "event_type = 'TABLE_MAP'"
    streamed_maps = (spark.read.format("delta").load(bronze_path).where(maps).select(*FACTS)
                     .distinct())
    indexed_maps = (spark.read.format("delta").load(file_cfg.table_path("bronze", "binlog_events"))
                    .where(maps).select(*FACTS).distinct())
    assert indexed_maps.count() >= 1
    assert streamed_maps.exceptAll(indexed_maps).count() == 0
    assert indexed_maps.exceptAll(streamed_maps).count() == 0


def _json_table(server: MariaDBServer) -> None:
    """A DDL that only a snapshot can name right (MariaDB's JSON column), and its rows."""
    server.execute("CREATE TABLE feed.docs (id INT PRIMARY KEY, j JSON, t TEXT)")
    server.execute("INSERT INTO feed.docs VALUES (1, %s, 'x'), (2, '\"str\"', NULL)",
                   ('{"a": [1, 2.5, "x\u00e9"], "b": null}',))


def test_a_ddls_rows_reach_bronze_only_after_its_snapshot_is_stored(
        spark, tmp_path: Path) -> None:
    # MariaDB's JSON is LONGTEXT with a json_valid CHECK: only a schema snapshot says a column
    # is JSON. A silver follow renders with the snapshots it loaded at its start and reads
    # bronze as it is: were the DDL's rows committed before its snapshot, a follow running
    # then would render the JSON documents as strings. So the stream snapshots first (held
    # at the gate: the snapshot is the only connection the running stream opens).
    lake = tmp_path / "lake"
    log = tmp_path / "stream.log"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    tables = Lake.of(cfg)
    docs = "feed.docs"
    with MariaDBServer(binlog_row_metadata="FULL") as server, TcpGate(server.port) as gate:
        server.execute("CREATE DATABASE feed CHARACTER SET utf8mb4")
        proc = _start_stream(lake, server, log, port=gate.port)
        try:
            _wait(lambda: _live(lake).get("state") == "running", 60, "the stream to run",
                  proc, log)
            gate.hold()
            _json_table(server)
            _wait(lambda: gate.held > 0, 60, "the snapshot after the CREATE TABLE", proc, log)
            time.sleep(cfg.stream.freshness_seconds + 2)  # silver follows meanwhile
            held = load_latest(spark, tables, "default")
            assert held is None or held.last_ddl is None, "the DDL was committed first"
            gate.release()
            assert _stop_at_the_end(proc, lake, server, log) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _, replayed, expected = _replayed(spark, cfg, server, [docs])
        assert replayed == expected


def test_a_kill_between_a_ddls_commit_and_its_snapshot_is_made_good_at_restart(
        spark, tmp_path: Path) -> None:
    # The snapshot failed (the server refused it): the DDL's commit holds the debt. A kill -9
    # then must not lose that snapshot: the restart pays it before silver follows, or silver
    # renders the JSON documents as strings. The first run has no silver follow (lag 0).
    lake = tmp_path / "lake"
    log = tmp_path / "stream.log"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    tables = Lake.of(cfg)
    snapshots = cfg.table_path("silver", "schema_snapshots")
    docs = "feed.docs"
    with MariaDBServer(binlog_row_metadata="FULL") as server, TcpGate(server.port) as gate:
        server.execute("CREATE DATABASE feed CHARACTER SET utf8mb4")
        proc = _start_stream(lake, server, log, port=gate.port, lag=0)
        try:
            _wait(lambda: _live(lake).get("state") == "running", 60, "the stream to run",
                  proc, log)
            gate.refuse()
            _json_table(server)
            end = server.execute("SHOW MASTER STATUS")[0][:2]
            _wait(lambda: (_live(lake).get("file"), _live(lake).get("pos")) == end, 60,
                  "the DDL's commit", proc, log)
            killed = _kill(proc, spark, tables)
            assert gate.refused > 0, "no snapshot was tried"
            assert killed.last_ddl is not None, "the DDL's commit did not record it"
            assert not Path(snapshots).exists()
            # The restart meets the gate held for longer than silver's bound: silver must
            # not follow the DDL's rows before the snapshot they owe is stored.
            gate.hold()
            proc = _start_stream(lake, server, log, port=gate.port)
            time.sleep(cfg.stream.freshness_seconds + 4)
            assert proc.poll() is None, log.read_text()[-3000:]
            gate.release()
            _wait(lambda: _live(lake).get("pid") == proc.pid, 60, "the restarted stream", proc,
                  log)
            assert _stop_at_the_end(proc, lake, server, log) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _, replayed, expected = _replayed(spark, cfg, server, [docs])
        assert replayed == expected
    # Paid once, at the restart: later commits owe nothing.
    assert spark.read.format("delta").load(snapshots).select("snapshot_id").distinct().count() == 1


def test_a_kill_before_a_rotations_files_entry_is_saved_loses_no_row_in_silver(
        spark, tmp_path: Path) -> None:
    # The stream saves a file's entry in bronze/files after the commit holding its ROTATE;
    # silver looks at a file again only when that entry changes. A kill -9 between the two
    # leaves the file `streaming` at an entry silver has already read: the lake is made so
    # here (the entry the rotation saved is deleted, as if never written), and the restart
    # must make silver read the rows committed after it.
    from pipelines.lake.tables import BRONZE_FILES

    lake = tmp_path / "lake"
    log = tmp_path / "stream.log"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    tables = Lake.of(cfg)
    rows = "feed.rows"
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        server.execute("CREATE DATABASE feed CHARACTER SET utf8mb4")
        server.execute("CREATE TABLE feed.rows (id INT PRIMARY KEY, v VARCHAR(20))")

        def insert(ids: range) -> None:
            server.execute("INSERT INTO feed.rows VALUES " + ", ".join(
                f"({i}, 'v{i}')" for i in ids))

        def stream_to_the_end(stop: signal.Signals) -> None:
            proc = _start_stream(lake, server, log, lag=0)
            try:
                _wait(lambda: _live(lake).get("pid") == proc.pid, 60, "the stream", proc, log)
                _stop_at_the_end(proc, lake, server, log, stop)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

        first = server.execute("SHOW MASTER STATUS")[0][0]
        insert(range(0, 50))
        stream_to_the_end(signal.SIGTERM)  # saves the entry of `first`: streaming
        run_silver(spark, cfg)  # silver has read `first` at that entry
        insert(range(50, 100))  # more rows in `first`, then its ROTATE
        server.execute("FLUSH BINARY LOGS")
        insert(range(100, 150))
        stream_to_the_end(signal.SIGKILL)
        tables.delete_where(spark, BRONZE_FILES, f"binlog_file = '{first}' "
                                                 "AND status = 'completed'")
        stream_to_the_end(signal.SIGTERM)  # the restart settles `first`
        silver, replayed, expected = _replayed(spark, cfg, server, [rows])
        assert replayed == expected
        assert len(silver) == 150
