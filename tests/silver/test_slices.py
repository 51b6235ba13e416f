"""Silver's slices and their day (``pipelines/silver/slices.py``, ``transform.on_day``).

Table-driven: how a run's files are cut into commits, and which slices have one day. On a
real MariaDB server whose binlogs hold a day, a midnight and the next day (event times set
with ``SET timestamp``): each file's day is found, silver's ``event_date`` is the UTC day of
every row's time, the rows are those the sorting write gives, and folding them reproduces the
server's table.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.bronze.files import FileState
from pipelines.errors import LakeChangedError
from pipelines.silver.slices import Slice, file_days, in_files, plan_slices, slice_day
from pipelines.silver.transform import on_day


A, B, C = ("s", "a.000001"), ("s", "a.000002"), ("t", "b.000001")


@pytest.mark.parametrize("sizes, commit, want", [
    # one slice of all (commit_bytes 0)
    ({A: 500, B: 500}, 0, [(in_files([A, B]), (A, B))]),
    # small files together, until the next would pass commit_bytes
    ({A: 300, B: 300, C: 300}, 700, [
        (in_files([A, B]), (A, B)),
        (in_files([C]), (C,))]),
    # a big file by start_pos ranges, each its own slice, naming the one file
    ({A: 1000}, 400, [
        ("(source_id = 's' AND binlog_file = 'a.000001' AND start_pos < 334)", (A,)),
        ("(source_id = 's' AND binlog_file = 'a.000001' AND start_pos >= 334 AND "
         "start_pos < 668)", (A,)),
        ("(source_id = 's' AND binlog_file = 'a.000001' AND start_pos >= 668)", (A,))]),
])
def test_plan_slices(sizes, commit, want):
    states = {k: FileState(*k, path="", size=v, status="done") for k, v in sizes.items()}
    assert plan_slices(list(sizes), states, commit) == [Slice(w, f) for w, f in want]


D = 20_000  # days since 1970-01-01


@pytest.mark.parametrize("files, days, want", [
    ((A,), {A: D}, dt.date(2024, 10, 4)),
    ((A, B), {A: D, B: D}, dt.date(2024, 10, 4)),
    ((A, B), {A: D, B: D + 1}, None),           # two days
    ((A, B), {A: D, B: None}, None),            # a file across midnight, or a row without time
    ((A, B), {A: D}, dt.date(2024, 10, 4)),     # B has no row changes: it adds no day
    ((A,), {}, None),                           # no row changes at all
])
def test_slice_day(files, days, want):
    assert slice_day(Slice("x", files), days) == want


def test_on_day_passes_the_day_and_stops_at_another():
    day = dt.date(2024, 10, 4)
    schema = pa.schema([("binlog_file", pa.string()), ("start_pos", pa.int64()),
                        ("event_date", pa.date32())])
    same = pa.record_batch([pa.array(["f.1", "f.1"]), pa.array([4, 90]), pa.array([day, day])],
                           schema=schema)
    assert list(on_day([same], day)) == [same]
    for other in (day + dt.timedelta(days=1), None):
        mixed = pa.record_batch([pa.array(["f.1", "f.2"]), pa.array([4, 377]),
                                 pa.array([day, other], pa.date32())], schema=schema)
        with pytest.raises(LakeChangedError, match=r"f\.2 at 377 .*run silver again"):
            list(on_day([same, mixed], day))


# --- a real server: a day, a midnight, the next day -------------------------------------

_DAY1 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
_DAY2 = _DAY1 + dt.timedelta(days=1)


def _at(server_conn, when: dt.datetime) -> None:
    with server_conn.cursor() as cur:
        cur.execute("SET timestamp = %s", (int(when.timestamp()),))


@pytest.mark.spark
@pytest.mark.mariadb
def test_silver_days_on_a_real_server(spark, tmp_path: Path):
    from devtools.mariadb import MariaDBServer
    from pipelines.bronze.job import run_bronze
    from pipelines.config import load_config
    from pipelines.history.lake import naming_plan
    from pipelines.bronze.table_maps import read_table_maps
    from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, Lake
    from pipelines.silver.job import run_silver
    from pipelines.silver.transform import SILVER_COLUMNS, to_silver
    from tests.support.replay import replay_silver, server_tables

    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                         "silver.commit_mb": 0.001})
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    with MariaDBServer() as server:
        with server.connect() as conn:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE d")
                cur.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20))")
            _at(conn, _DAY1 + dt.timedelta(hours=10))  # file 1: day 1 only
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO d.t VALUES (%s, %s)", [(i, f"a{i}") for i in range(5)])
                cur.execute("UPDATE d.t SET v = 'b' WHERE id = 1")
            conn.commit()
            server.flush_logs()
            _at(conn, _DAY2 - dt.timedelta(seconds=1))  # file 2: across midnight
            with conn.cursor() as cur:
                cur.execute("INSERT INTO d.t VALUES (10, 'late')")
            conn.commit()
            _at(conn, _DAY2)
            with conn.cursor() as cur:
                cur.execute("UPDATE d.t SET v = 'c' WHERE id = 10")
                cur.execute("DELETE FROM d.t WHERE id = 2")
            conn.commit()
            server.flush_logs()
            _at(conn, _DAY2 + dt.timedelta(hours=12))  # file 3: day 2 only
            with conn.cursor() as cur:
                cur.execute("INSERT INTO d.t VALUES (20, 'next')")
                cur.execute("UPDATE d.t SET v = 'd' WHERE id = 3")
            conn.commit()
            server.flush_logs()
            expected = server_tables(conn, ["d.t"])
            files = server.binlog_files()
            for f in files:
                shutil.copy(f, binlogs / f.name)
            assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
            run_silver(spark, cfg)
            lake = Lake.of(cfg)
            silver = [r.asDict() for r in lake.read(spark, SILVER_EVENTS).collect()]
            replayed = replay_silver(silver, conn, ["d.t"])

    assert replayed == expected
    # each file's day: the first and last hold one, the midnight one none
    names = sorted({r["binlog_file"] for r in silver})
    days = file_days(spark, lake, in_files([(cfg.source.name, n) for n in names]))
    day1 = (_DAY1.date() - dt.date(1970, 1, 1)).days
    assert [days[(cfg.source.name, n)] for n in names] == [day1, None, day1 + 1]
    # every row's event_date is the UTC day of its time, whichever way it was written
    by_id: dict[str, list[dt.date]] = {}
    for r in sorted(silver, key=lambda r: r["seq"]):
        # pyspark hands back a naive local time: astimezone reads it as such
        assert r["event_date"] == r["event_timestamp"].astimezone(dt.timezone.utc).date(), r
        by_id.setdefault(r["pk_values"], []).append(r["event_date"])
    assert by_id["10"] == [_DAY1.date(), _DAY2.date()]
    assert by_id["0"] == [_DAY1.date()] and by_id["20"] == [_DAY2.date()]
    # the rows are those the sorting write renders (no day given)
    plan = naming_plan(spark, cfg)
    plan.table_maps = read_table_maps(spark, lake)
    sorted_way = to_silver(lake.read(spark, BRONZE_EVENTS), plan, null_lists=False)
    assert sorted(tuple(r) for r in sorted_way.select(*SILVER_COLUMNS).collect()) == \
        sorted(tuple(r[c] for c in SILVER_COLUMNS) for r in silver)


@pytest.mark.spark
def test_a_row_of_another_day_stops_the_commit_and_a_rerun_recovers(spark, tmp_path: Path,
                                                                   monkeypatch, capsys):
    """Bronze's days are read once per run: if a slice's rows turn out to be of another day
    (bronze changed during the run; here the days are made wrong), the slice stops before its
    commit with ``LakeChangedError`` naming the row (raised in the engine's task, raised
    again as itself on the driver), and a re-run writes every row change once."""
    from pipelines.lake.tables import SILVER_EVENTS, Lake
    from pipelines.silver import job
    from pipelines.silver.job import KEY, run_silver
    from tests.support.lake_runs import bronze_of_sample

    cfg = bronze_of_sample(spark, tmp_path, "mariadb-bin.000003")
    real = job.file_days
    monkeypatch.setattr(job, "file_days", lambda *a: {k: 0 for k in real(*a)})  # 1970-01-01
    # The task's error comes back as itself (errors.raised_in_task), not as the engine's.
    with pytest.raises(LakeChangedError, match="not 1970-01-01 as bronze said.*run silver "
                       "again") as raised:
        run_silver(spark, cfg)
    assert not isinstance(raised.value.__cause__, LakeChangedError)  # the engine's exception
    assert "Traceback" in str(raised.value.__cause__)
    from pipelines.cli.main import main  # the command says it in one line, exit status 1

    capsys.readouterr()
    assert main(["--lake", str(tmp_path / "lake"), "silver"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("binlake: error: silver: the row change of mariadb-bin.000003 at ")
    assert err.endswith("run silver again") and "\n" not in err
    lake = Lake.of(cfg)
    assert not lake.exists(spark, SILVER_EVENTS) or lake.read(spark, SILVER_EVENTS).count() == 0
    monkeypatch.setattr(job, "file_days", real)
    assert run_silver(spark, cfg).appended == 295  # mariadb-binlog -v: 295 row changes
    silver = lake.read(spark, SILVER_EVENTS)
    assert silver.select(*KEY).distinct().count() == silver.count() == 295
