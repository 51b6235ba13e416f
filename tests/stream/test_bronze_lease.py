"""The stream and the lake's ``bronze`` lease: its take-over of files file mode indexed holds
it; it compacts ``bronze/files`` under it when it is free.

Take-over: a real MariaDB, its binlog indexed by ``binlake bronze``, then ``binlake stream
--start-file`` on that same file while another process holds the ``bronze`` lease: the stream
refuses after ``--wait`` naming the holder (nothing deleted), or waits and takes the file over
once the lease is free, next to a real ``binlake bronze`` of other files; afterwards every row
is in bronze and silver once. Compaction: a stream started on a lake whose ``bronze/files``
is due compacts it (not while another process holds ``bronze``: it does not wait), and
``StreamFiles`` asks for compaction every ``compact_every`` saves that wrote something.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.support.lake_runs import (SAMPLE_FILES, SAMPLES, assert_silver_once, binlake, finish,
                                     hold_lease, start, wait_for)

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

SAMPLE_ROW_CHANGES = 340  # samples/binlogs/README.md


def _changes(spark, lake: Path, source: str) -> list[tuple]:
    return [tuple(r) for r in spark.read.format("delta").load(str(lake / "bronze" / "binlog_events"))
            .where(f"source_id = '{source}' AND event_type IN ('INSERT', 'UPDATE', 'DELETE')")
            .select("binlog_file", "start_pos", "row_in_event").collect()]


def test_stream_takeover_waits_for_the_bronze_lease_and_keeps_every_row_once(
        spark, tmp_path) -> None:
    from devtools.mariadb import MariaDBServer
    from pipelines.bronze.files import load_states
    from pipelines.lake.tables import Lake
    from pipelines.stream.progress import live_path, read_live

    lake = tmp_path / "lake"
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    with MariaDBServer() as server:
        server.execute("CREATE DATABASE app")
        server.execute("CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
        for i in range(30):
            server.execute("INSERT INTO app.t VALUES (%s, %s)", (i, i))
        first = server.binlog_files()[0].name
        server.flush_logs()
        shutil.copy(server.binlog_dir / first, binlogs / first)
        rc, out, err = binlake(lake, "bronze", "--binlog-dir", str(binlogs), "--all")
        assert rc == 0, err
        indexed = _changes(spark, lake, "default")
        assert len(indexed) == 30

        env = {"BINLAKE_SOURCE_DSN": server.dsn(), "BINLAKE_STREAM_BATCH_INTERVAL_MS": "200",
               "BINLAKE_STREAM_SILVER_LAG_SECONDS": "1"}
        stream_args = ("stream", "--server-id", "4545", "--start-file", first)
        holder = hold_lease(lake, "bronze")
        try:
            # A bounded wait: refused with exit 75 naming the holder, the file left alone.
            rc, out, err = binlake(lake, "--wait", "3", *stream_args, env=env, timeout=300)
            assert rc == 75, err
            for fact in (f"host {socket.gethostname()}", f"pid {holder.pid}",
                         "test holder of bronze", "gave up after waiting 3s"):
                assert fact in err, (fact, err)
            assert sorted(_changes(spark, lake, "default")) == sorted(indexed)

            # A longer wait: the stream waits until the holder is gone, then takes over.
            stream = start(lake, "--wait", "600", *stream_args, env=env)
            err_lines: list[str] = []
            reader = threading.Thread(target=lambda: err_lines.extend(stream.stderr),
                                      daemon=True)
            reader.start()
            assert wait_for(lambda: any("bronze is being written by" in line
                                        for line in err_lines) or stream.poll() is not None,
                            300, 0.1), "".join(err_lines)
            assert stream.poll() is None, "".join(err_lines)
            time.sleep(1.0)
            assert sorted(_changes(spark, lake, "default")) == sorted(indexed), (
                "the take-over must not delete while bronze is held")
            # A real bronze run of other files races the stream for the lease.
            other = start(lake, "bronze", "--binlog-dir", str(SAMPLES), "--all",
                          "--source", "samples")
        finally:
            holder.kill()
            holder.wait()
        assert wait_for(lambda: (read_live(live_path(str(lake), "default")) or {}).get("state")
                        == "running" or stream.poll() is not None, 600, 0.2)
        for i in range(30, 50):
            server.execute("INSERT INTO app.t VALUES (%s, %s)", (i, i))
        rc, out, err = finish(other)
        assert rc == 0, out + err
        assert wait_for(lambda: len(_changes(spark, lake, "default")) >= 50, 300, 0.5)
        time.sleep(2.0)
        stream.terminate()
        stream.wait(300)
        reader.join()
        assert stream.returncode == 0, "".join(err_lines)[-3000:]
    rc, out, err = binlake(lake, "silver")
    assert rc == 0, err
    changes = _changes(spark, lake, "default")
    assert len(changes) == len(set(changes)) == 50, "every row of the source once"
    assert len(set(changes) & set(indexed)) == 30, "the indexed file streamed again, once"
    assert len(_changes(spark, lake, "samples")) == SAMPLE_ROW_CHANGES
    states = load_states(spark, Lake(str(lake)))
    assert sorted(n for s, n in states if s == "samples") == SAMPLE_FILES
    assert states[("default", first)].status in ("streaming", "completed")
    assert states[("default", first)].path.startswith("stream://")
    assert assert_silver_once(spark, lake) == 50 + SAMPLE_ROW_CHANGES


def test_stream_files_ask_for_compaction_every_n_saves(spark, tmp_path) -> None:
    from pipelines.lake.tables import Lake
    from pipelines.stream.files_state import StreamFiles

    calls = []
    files = StreamFiles(spark, Lake(str(tmp_path / "lake")), "s", "stream://h:1",
                        compact=lambda: calls.append(files.saves), compact_every=2)
    for n in range(5):
        files.streaming("bin.000001", 4 + n, n)
        files.save()
        files.save()  # nothing new: no row, not counted
    assert calls == [2, 4]


def test_a_stream_compacts_bronze_files_when_the_bronze_lease_is_free(spark, tmp_path) -> None:
    from devtools.mariadb import MariaDBServer
    from pipelines.bronze.files import FileState, load_states, save_states
    from pipelines.lake.tables import Lake

    lake = tmp_path / "lake"

    def grow(first: int) -> dict:
        for n in range(first, first + 6):  # 240 rows for 40 files: due (> 2 * 40 + 100)
            save_states(spark, Lake(str(lake)), [FileState("old", f"bin.{i:06d}", "/b", n,
                                                           "partial", row_changes=n)
                                                 for i in range(40)])
        return {k: v for k, v in load_states(spark, Lake(str(lake))).items() if k[0] == "old"}

    def rows() -> int:
        return spark.read.format("delta").load(str(lake / "bronze" / "files")).count()

    want = grow(0)
    with MariaDBServer() as server:
        server.execute("CREATE DATABASE app")
        env = {"BINLAKE_SOURCE_DSN": server.dsn(), "BINLAKE_STREAM_BATCH_INTERVAL_MS": "200"}
        args = ("-v", "stream", "--server-id", "4546", "--stop-after", "3")
        rc, out, err = binlake(lake, *args, env=env, timeout=300)
        assert rc == 0, err
        # its start file's `streaming` row (the take-over) came first: 41 files
        assert "bronze/files compacted: 241 -> 41 rows" in err, err
        assert rows() < 100
        assert {k: v for k, v in load_states(spark, Lake(str(lake))).items()
                if k[0] == "old"} == want
        want = grow(6)
        before = rows()
        holder = hold_lease(lake, "bronze")
        try:  # a restart (no take-over) while bronze is busy: it neither waits nor compacts
            rc, out, err = binlake(lake, *args, env=env, timeout=300)
        finally:
            holder.kill()
            holder.wait()
        assert rc == 0, err
        assert "bronze is being written by" not in err and "compacted" not in err, err
        assert rows() >= before
    assert {k: v for k, v in load_states(spark, Lake(str(lake))).items() if k[0] == "old"} == want
