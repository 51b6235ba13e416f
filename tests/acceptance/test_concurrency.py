"""Two binlake commands on one lake at the same moment, as real subprocesses, repeated.

Afterwards every row is in bronze, silver and gold exactly once and every file's state is
right; a second writer waits for the first (bounded, saying who holds the stage) or exits 75;
a holder killed with SIGKILL never blocks the lake beyond its lease's expiry.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import time
import uuid
from pathlib import Path

import pytest

from tests.support.lake_runs import (SAMPLE_FILES, SAMPLES, assert_bronze_once,
                                     assert_silver_once, binlake, delta_creates, hold_lease, start,
                                     together, wait_for)

pytestmark = [pytest.mark.spark]

ROUNDS = 3
SAMPLE_ROW_CHANGES = 340  # samples/binlogs/README.md
BRONZE_ALL = ["bronze", "--binlog-dir", str(SAMPLES), "--all"]


def _bronze(*names: str) -> list[str]:
    return ["bronze", "--binlog-dir", str(SAMPLES), "--files", ",".join(names)]


def _ok(results) -> None:
    for rc, out, err in results:
        assert rc == 0, f"exit {rc}\n{out}\n{err}"


def _decoded(results) -> list[str]:
    """The files the runs decoded (not skipped), from their per-file lines."""
    return sorted(line.split(":")[1].strip() for _, out, _ in results
                  for line in out.splitlines()
                  if line.startswith("bronze: mariadb-bin.") and ": completed" in line)


@pytest.fixture(scope="module")
def bronze_lake(tmp_path_factory) -> Path:
    """A lake with the samples in bronze (copied per test round)."""
    lake = tmp_path_factory.mktemp("bronze") / "lake"
    rc, out, err = binlake(lake, *BRONZE_ALL)
    assert rc == 0, err
    return lake


def _copy(lake: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    shutil.copytree(lake, dest / "lake")
    return dest / "lake"


def test_bronze_pair_same_files_decodes_each_file_once(spark, tmp_path) -> None:
    for i in range(ROUNDS):
        lake = tmp_path / f"round{i}" / "lake"
        lake.parent.mkdir()
        res = together(lake, [BRONZE_ALL, BRONZE_ALL])
        _ok(res)
        assert _decoded(res) == SAMPLE_FILES, "each file decoded by exactly one of the two"
        assert assert_bronze_once(spark, lake, SAMPLE_FILES) == SAMPLE_ROW_CHANGES


def test_bronze_pair_different_files_keeps_both_states(spark, tmp_path) -> None:
    first, second = SAMPLE_FILES[:2], SAMPLE_FILES[2:]
    for i in range(ROUNDS):
        lake = tmp_path / f"round{i}" / "lake"
        lake.parent.mkdir()
        res = together(lake, [_bronze(*first), _bronze(*second)])
        _ok(res)
        assert _decoded(res) == SAMPLE_FILES
        assert assert_bronze_once(spark, lake, SAMPLE_FILES) == SAMPLE_ROW_CHANGES


def test_silver_pair_appends_each_row_once_and_creates_once(spark, tmp_path, bronze_lake) -> None:
    for i in range(ROUNDS):
        lake = _copy(bronze_lake, tmp_path / f"round{i}")
        res = together(lake, [["silver"], ["silver"]])
        _ok(res)
        appended = [int(out.split(" row changes appended")[0].rsplit(" ", 1)[1])
                    for _, out, _ in res]
        assert sorted(appended) == [0, SAMPLE_ROW_CHANGES]
        assert assert_silver_once(spark, lake) == SAMPLE_ROW_CHANGES
        assert delta_creates(lake / "silver" / "binlog_events") == 1


@pytest.mark.parametrize("maintenance", ["vacuum", "optimize"])
def test_maintenance_during_silver_loses_nothing(spark, tmp_path, bronze_lake,
                                                 maintenance) -> None:
    """``vacuum`` or ``optimize`` (which rewrites files of every lake table) started with a
    silver run: both exit 0, every row once, one silver table id."""
    for i in range(ROUNDS):
        lake = _copy(bronze_lake, tmp_path / f"round{i}")
        res = together(lake, [["silver"], [maintenance]])
        _ok(res)
        assert assert_silver_once(spark, lake) == SAMPLE_ROW_CHANGES
        assert assert_bronze_once(spark, lake, SAMPLE_FILES) == SAMPLE_ROW_CHANGES
        assert delta_creates(lake / "silver" / "binlog_events") == 1


# -- the lease protocol itself, in one process ---------------------------------------------

def test_racing_acquirers_exactly_one_wins(tmp_path) -> None:
    import threading

    from pipelines.errors import LeaseHeldError
    from pipelines.lake.lease import Lease, LocalLeaseStore

    for _ in range(20):
        store = LocalLeaseStore(str(tmp_path / uuid.uuid4().hex))
        gate, won, refused = threading.Barrier(8), [], []

        def contend(i: int) -> None:
            lease = Lease(store, "silver", f"contender {i}", expiry=30, wait=0,
                          say=lambda _m: None)
            gate.wait()
            try:
                won.append(lease.acquire())
            except LeaseHeldError as exc:
                refused.append(exc)

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and len(refused) == 7
        assert all(e.holder.token == won[0].token for e in refused)


def test_a_stalled_holder_learns_it_lost_the_lease(tmp_path) -> None:
    from pipelines.lake.lease import Lease, LocalLeaseStore

    store = LocalLeaseStore(str(tmp_path / "leases"))
    stalled = Lease(store, "bronze", "stalled", expiry=3, wait=0, say=lambda _m: None)
    stalled.acquire()
    stalled._stop.set()  # its heartbeat stops, as in a frozen VM
    stalled._beat.join()
    time.sleep(3.2)
    other = Lease(store, "bronze", "other", expiry=3, wait=0, say=lambda _m: None)
    assert other.acquire().generation == 2
    stalled.renew()
    assert stalled.lost and "taken over" in stalled.lost and "other" in stalled.lost
    stalled.release()
    assert store.generations()[-1] == 2 and not other.me.released
    other.release()


# -- a holder that is alive, dead, or on another host ------------------------------------

def test_second_writer_waits_bounded_then_exits_75_naming_the_holder(tmp_path, bronze_lake) -> None:
    lake = _copy(bronze_lake, tmp_path / "busy")
    holder = hold_lease(lake, "silver")
    try:
        t0 = time.monotonic()
        rc, out, err = binlake(lake, "--wait", "3", "silver")
        waited = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    assert rc == 75, err
    assert waited >= 3
    for fact in (f"host {socket.gethostname()}", f"pid {holder.pid}", "test holder of silver",
                 "since 20", "gave up after waiting 3s"):
        assert fact in err, (fact, err)
    assert not (lake / "silver" / "binlog_events").exists(), "the refused run wrote nothing"


def test_status_names_the_holder(spark, tmp_path, bronze_lake) -> None:
    lake = _copy(bronze_lake, tmp_path / "status")
    holder = hold_lease(lake, "bronze")
    try:
        rc, out, err = binlake(lake, "status", "--format", "json")
    finally:
        holder.kill()
        holder.wait()
    assert rc == 0, err
    leases = {x["stage"]: x for x in json.loads(out)["leases"]}
    assert leases["bronze"]["state"] == "held" and leases["bronze"]["pid"] == holder.pid
    assert leases["bronze"]["command"] == "test holder of bronze"


def test_killed_holder_on_this_host_is_taken_over_at_once(spark, tmp_path, bronze_lake) -> None:
    lake = _copy(bronze_lake, tmp_path / "dead")
    holder = hold_lease(lake, "silver")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    t0 = time.monotonic()
    rc, out, err = binlake(lake, "--wait", "0", "silver")
    assert rc == 0, err
    assert time.monotonic() - t0 < 60
    assert assert_silver_once(spark, lake) == SAMPLE_ROW_CHANGES


def test_holder_on_another_host_blocks_only_until_its_expiry(spark, tmp_path, bronze_lake) -> None:
    """A kill -9 on another machine: its lease stops being renewed and expires. The test
    renews a foreign lease until the run says it waits for it, then stops renewing."""
    import threading

    lake = _copy(bronze_lake, tmp_path / "elsewhere")
    d = lake / "_binlake" / "leases" / "silver"
    d.mkdir(parents=True)
    token = uuid.uuid4().hex

    def renew() -> float:
        expires = time.time() + 5
        tmp = d / ".renew"
        tmp.write_text(json.dumps({
            "stage": "silver", "generation": 1, "token": token, "host": "elsewhere", "pid": 1,
            "pid_start": None, "command": "binlake silver", "since": "2026-11-23T00:00:00",
            "expires": expires, "released": False}))
        os.replace(tmp, d / f"{1:020d}.json")
        return expires

    expires = renew()
    proc = start(lake, "--wait", "600", "silver")
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)
    reader.start()
    while not any("host elsewhere pid 1" in line for line in err_lines):
        assert proc.poll() is None, "the run did not wait for a live foreign lease"
        expires = renew()
        time.sleep(0.5)
    out = proc.stdout.read()
    assert proc.wait(600) == 0, "".join(err_lines)
    reader.join()
    assert time.time() >= expires, "must not take a live lease over"
    assert assert_silver_once(spark, lake) == SAMPLE_ROW_CHANGES, out


def test_kill_9_of_a_bronze_run_then_rerun_is_exactly_once(spark, tmp_path) -> None:
    for i, delay in enumerate((0.0, 0.4, 1.0)):
        lake = tmp_path / f"kill{i}" / "lake"
        lake.parent.mkdir()
        proc = start(lake, *BRONZE_ALL)
        leases = lake / "_binlake" / "leases" / "bronze"
        assert wait_for(lambda: leases.is_dir() and any(leases.glob("*.json")), 120)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        rc, out, err = binlake(lake, "--wait", "0", *BRONZE_ALL)
        assert rc == 0, err
        assert time.monotonic() - t0 < 60
        assert assert_bronze_once(spark, lake, SAMPLE_FILES) == SAMPLE_ROW_CHANGES


# -- gold: one export per gold database ----------------------------------------------------

@pytest.mark.mariadb
def test_gold_pair_into_one_database_is_exactly_once(spark, tmp_path, bronze_lake, mariadb) -> None:
    for i in range(ROUNDS):
        lake = _copy(bronze_lake, tmp_path / f"gold{i}")
        assert binlake(lake, "silver")[0] == 0
        db = "gold_cc_" + uuid.uuid4().hex[:8]
        dsn = mariadb.dsn(db)
        res = together(lake, [["gold", "--gold-dsn", dsn], ["gold", "--gold-dsn", dsn]])
        _ok(res)
        password = dsn.split("@")[0].rsplit(":", 1)[-1]
        assert all(password not in out + err for _, out, err in res)
        gold = [tuple(r) for r in mariadb.execute(
            "SELECT source_id, binlog_file, start_pos, row_in_event FROM binlog_events", db=db)]
        assert len(gold) == len(set(gold)) == SAMPLE_ROW_CHANGES
        silver = {tuple(r) for r in spark.read.format("delta").load(
            str(lake / "silver" / "binlog_events")).select(
            "source_id", "binlog_file", "start_pos", "row_in_event").collect()}
        assert set(gold) == silver


# -- JVM Spark with delta-spark ------------------------------------------------------------

def _jvm_flags(request, jvm: str) -> tuple[list[str], str | None]:
    """(CLI flags, engine) of a JVM leg: a client of the tests' Spark Connect JVM server
    (``connect``), or a local JVM of the process's own (``spark``)."""
    if jvm == "connect":
        return ["--spark-remote", request.getfixturevalue("spark_connect_url")], None
    return [], "spark"


@pytest.mark.parametrize("jvm", [
    pytest.param("connect", marks=pytest.mark.jvm),
    pytest.param("spark", marks=[pytest.mark.classic, pytest.mark.soak]),
])
def test_jvm_spark_bronze_pair_and_silver_pair(spark, tmp_path, request, jvm) -> None:
    """Both pairs, two rounds, on JVM Spark with delta-spark. ``connect`` (``make test-jvm``): every
    process is a client of the tests' one Spark Connect JVM server (``spark_connect_url``),
    so no process starts a JVM of its own; ``spark`` (``make test-soak``): every process
    starts its own local JVM, as two clusters would (a few minutes on 2 cores). Either way the
    two runs are separate processes with separate Spark sessions, racing through the lease
    and delta-spark's commits; one small file per bronze run keeps the JVM's work short. Then
    ``optimize`` compacts ``bronze/files`` there."""
    lake = tmp_path / "jvm" / "lake"
    lake.parent.mkdir()
    flags, engine = _jvm_flags(request, jvm)
    env = {"BINLAKE_BRONZE_PARALLELISM": "1"}
    done: list[str] = []
    held = 0
    for round_ in range(2):  # two rounds: new files each, the second on existing tables
        files = SAMPLE_FILES[2 * round_:2 * round_ + 2]
        res = together(lake, [flags + _bronze(files[0]), flags + _bronze(files[1])],
                       engine=engine, env=env)
        _ok(res)
        assert _decoded(res) == files
        done += files
        total = assert_bronze_once(spark, lake, done)
        res = together(lake, [flags + ["silver"], flags + ["silver"]], engine=engine, env=env)
        _ok(res)
        appended = sorted(int(out.split(" row changes appended")[0].rsplit(" ", 1)[1])
                          for _, out, _ in res)
        assert appended == [0, total - held], round_
        held = total
        assert assert_silver_once(spark, lake) == total
        assert delta_creates(lake / "silver" / "binlog_events") == 1
    # bronze/files' compaction on delta-spark: two rows per file (in_progress, completed)
    rc, out, err = binlake(lake, *flags, "optimize", "--tables", "bronze/files", engine=engine)
    assert rc == 0, err
    assert "bronze/files: superseded state rows deleted, 8 -> 4 row(s)" in out, out
    assert assert_bronze_once(spark, lake, done) == held


@pytest.mark.mariadb
@pytest.mark.parametrize("jvm", [
    pytest.param("connect", marks=pytest.mark.jvm),
    pytest.param("spark", marks=[pytest.mark.classic, pytest.mark.soak]),
])
def test_jvm_spark_same_files_maintenance_and_gold_pairs(spark, tmp_path, request, mariadb,
                                                         jvm) -> None:
    """The other pairs on JVM Spark with delta-spark (processes as in the test above): two
    ``bronze`` of the same files; ``silver`` with ``optimize`` and, on a copy, with ``vacuum``;
    two ``gold`` into one gold database. Every row once, one silver table id, gold = silver."""
    lake = tmp_path / "jvm" / "lake"
    lake.parent.mkdir()
    flags, engine = _jvm_flags(request, jvm)
    files = SAMPLE_FILES[:2]  # 18 + 16 row changes
    env = {"BINLAKE_BRONZE_PARALLELISM": "1"}
    res = together(lake, [flags + _bronze(*files), flags + _bronze(*files)], engine=engine,
                   env=env)
    _ok(res)
    assert _decoded(res) == files, "each file decoded by exactly one of the two"
    assert assert_bronze_once(spark, lake, files) == 34
    copy = _copy(lake, tmp_path / "vacuum")
    for where, maintenance in ((lake, "optimize"), (copy, "vacuum")):
        _ok(together(where, [flags + ["silver"], flags + [maintenance]], engine=engine,
                     env=env))
        assert assert_silver_once(spark, where) == 34, maintenance
        assert assert_bronze_once(spark, where, files) == 34, maintenance
        assert delta_creates(where / "silver" / "binlog_events") == 1, maintenance
    db = "gold_jvm_" + uuid.uuid4().hex[:8]
    dsn = mariadb.dsn(db)
    _ok(together(lake, [flags + ["gold", "--gold-dsn", dsn]] * 2, engine=engine, env=env))
    gold = [tuple(r) for r in mariadb.execute(
        "SELECT source_id, binlog_file, start_pos, row_in_event FROM binlog_events", db=db)]
    assert len(gold) == len(set(gold)) == 34
    silver = {tuple(r) for r in spark.read.format("delta").load(
        str(lake / "silver" / "binlog_events")).select(
        "source_id", "binlog_file", "start_pos", "row_in_event").collect()}
    assert set(gold) == silver


# -- stream and index on one lake ---------------------------------------------------------


@pytest.mark.mariadb
@pytest.mark.parametrize("engine", [
    "sail", pytest.param("connect", marks=pytest.mark.jvm)])
def test_stream_and_index_together_keep_every_row_once(spark, tmp_path, request,
                                                       engine) -> None:
    """A stream follows a real MariaDB (committing bronze, running silver every second) while
    whole ``index`` runs of other files go on: three rounds on the embedded engine, one on
    JVM Spark (stream and index as clients of the tests' Spark Connect JVM server)."""
    from pipelines.bronze.files import load_states
    from pipelines.stream.progress import live_path, read_live
    from tests.support.lake_runs import finish
    from devtools.mariadb import MariaDBServer

    lake = tmp_path / "lake"
    lake.mkdir()
    flags = (["--spark-remote", request.getfixturevalue("spark_connect_url")]
             if engine == "connect" else [])
    rounds = ROUNDS if engine == "sail" else 1
    with MariaDBServer() as server:
        server.execute("CREATE DATABASE app")
        server.execute("CREATE TABLE app.t (id INT PRIMARY KEY, v INT)")
        env = {"BINLAKE_SOURCE_DSN": server.dsn(), "BINLAKE_STREAM_BATCH_INTERVAL_MS": "200",
               "BINLAKE_STREAM_SILVER_LAG_SECONDS": "1"}
        stream = start(lake, *flags, "stream", "--server-id", "4444", env=env)
        assert wait_for(lambda: (read_live(live_path(str(lake), "default")) or {}).get("state")
                        == "running", 600, 0.2)
        for round_ in range(rounds):
            for i in range(20):
                server.execute("INSERT INTO app.t VALUES (%s, %s)", (round_ * 100 + i, i))
            # `index` (bronze → silver → quality) while the stream commits bronze and silver.
            index = start(lake, *flags, "index", "--binlog-dir", str(SAMPLES), "--all",
                          "--source", f"samples{round_}")
            for i in range(20, 40):
                server.execute("INSERT INTO app.t VALUES (%s, %s)", (round_ * 100 + i, i))
            rc, out, err = finish(index)
            assert rc == 0, out + err
        # Stop once the stream has read up to the server's end (on JVM Spark each silver
        # follow takes a while, and the stream reads nothing meanwhile): SIGTERM commits it.
        file, pos = server.execute("SHOW MASTER STATUS")[0][:2]

        def caught_up() -> bool:
            st = read_live(live_path(str(lake), "default")) or {}
            return (st.get("file") or "", st.get("pos") or 0) >= (file, pos)

        assert wait_for(lambda: caught_up() or stream.poll() is not None, 600, 0.2), (
            read_live(live_path(str(lake), "default")))
        assert stream.poll() is None, "the stream stopped on its own:\n" + finish(stream)[2][-5000:]
        stream.terminate()
        rc, out, err = finish(stream)
        assert rc == 0, err[-3000:]
    _ok([binlake(lake, *flags, "silver")])
    from pipelines.lake.tables import Lake

    states = load_states(spark, Lake(str(lake)))
    for round_ in range(rounds):
        mine = {n: st for (s, n), st in states.items() if s == f"samples{round_}"}
        assert sorted(mine) == SAMPLE_FILES and all(st.status == "completed"
                                                    for st in mine.values())
    assert any(s == "default" for s, _ in states), "the stream's files are recorded too"
    silver = assert_silver_once(spark, lake)
    assert silver == rounds * (SAMPLE_ROW_CHANGES + 40)
