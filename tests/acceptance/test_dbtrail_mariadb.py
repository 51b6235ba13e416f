"""dbtrail's columns end to end on a real MariaDB, and on a lake written before them.

Statements run on three connections (two with ``binlog_annotate_row_events=ON``, one OFF);
bronze, silver and gold must hold, per row change, the exact statement text run (NULL for the
session that logged none), the ``CONNECTION_ID()`` where MariaDB logs one (its DDL; a row
transaction opens with the GTID event, which carries no thread id, so there it is NULL — as
``mariadb-binlog`` shows), NULL ``commit_ts_us`` (MariaDB writes none) and NULL ``query_hash``
(MariaDB has no ``STATEMENT_DIGEST``: dbtrail leaves it NULL too).

The lake is first written, then made *old* (bronze and silver rewritten without the new
columns, gold's table without them); the next runs must add the columns (Delta schema
evolution on append; ``ALTER TABLE … ADD COLUMN`` in gold), keep the old rows with NULLs and
export every row to gold exactly once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, Lake
from pipelines.silver.job import run_silver
from devtools.mariadb import MariaDBServer

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

NEW = ["query_text", "commit_ts_us"]
GOLD_NEW = ["query_text", "query_hash", "commit_ts_us"]
DB = "dbt"

PART1 = [  # (connection, statement): before the lake is made old
    ("a", "INSERT INTO dbt.t VALUES (1, 'a', 1), (2, 'b', 2)"),
    ("b", "UPDATE dbt.t SET n = n + 10 WHERE id <= 2"),
]
PART2 = [  # after: the runs that add the columns
    ("a", "BEGIN"),
    ("a", "INSERT INTO dbt.t VALUES (3, 'c', 3)"),
    ("a", "DELETE FROM dbt.t WHERE id = 2"),
    ("a", "COMMIT"),
    ("b", "UPDATE dbt.t SET v = 'é\tx' /* a comment */\nWHERE id = 3"),
    ("c", "INSERT INTO dbt.t VALUES (4, 'no annotate', 4)"),
    ("b", "DELETE FROM dbt.t WHERE id IN (1, 4)"),
]


def _run(conns: dict, steps: list[tuple[str, str]]) -> None:
    """Run each statement on its connection (autocommit; BEGIN/COMMIT as statements)."""
    for who, sql in steps:
        with conns[who].cursor() as cur:
            cur.execute(sql)


def _index(spark, cfg, server: MariaDBServer, binlogs: Path, first: str) -> None:
    server.copy_closed_binlogs(binlogs, first)
    res = run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
    assert not res.failed
    run_silver(spark, cfg)


def _make_old(spark, lake: Lake, table) -> None:
    """Rewrite ``table`` as a binlake of before this change wrote it: without the columns."""
    path = Path(lake.path(table))
    old = path.with_name(path.name + "_old")
    df = spark.read.format("delta").load(str(path)).drop(*NEW)
    df.write.format("delta").partitionBy(*table.partition_by).save(str(old))
    shutil.rmtree(path)
    old.rename(path)


@pytest.fixture(scope="module")
def trail(spark, mariadb, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dbtrail")
    binlogs = tmp / "binlogs"
    binlogs.mkdir()
    cfg = load_config(env={}, overrides={"lake.root": str(tmp / "lake"),
                                         "bronze.statement_text": True})
    lake = Lake.of(cfg)
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.flush_logs()
    first = mariadb.binlog_files()[-1].name
    conns = {k: mariadb.connect() for k in "abc"}
    ids = {}
    for k, conn in conns.items():
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_annotate_row_events = "
                        + ("OFF" if k == "c" else "ON"))
            cur.execute("SELECT CONNECTION_ID()")
            ids[k] = int(cur.fetchone()[0])
        conn.autocommit(True)
    with conns["a"].cursor() as cur:
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute("CREATE TABLE dbt.t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
    _run(conns, PART1)
    _index(spark, cfg, mariadb, binlogs, first)
    gold_dsn = mariadb.dsn("dbt_gold")
    mariadb.execute("DROP DATABASE IF EXISTS dbt_gold")
    assert main(["--lake", cfg.lake.root, "init", "--gold-dsn", gold_dsn]) == 0
    assert main(["--lake", cfg.lake.root, "gold", "--gold-dsn", gold_dsn]) == 0
    # Now make everything old: lake tables and gold's table without the new columns.
    for table in (BRONZE_EVENTS, SILVER_EVENTS):
        _make_old(spark, lake, table)
    mariadb.execute("ALTER TABLE dbt_gold.binlog_events "
                    + ", ".join(f"DROP COLUMN {c}" for c in GOLD_NEW))
    second = mariadb.binlog_files()[-1].name
    _run(conns, PART2)
    _index(spark, cfg, mariadb, binlogs, second)
    for conn in conns.values():
        conn.close()
    yield {"cfg": cfg, "lake": lake, "ids": ids, "dsn": gold_dsn, "server": mariadb,
           "binlogs": binlogs}
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute("DROP DATABASE IF EXISTS dbt_gold")


def _expected(steps) -> list[str | None]:
    """The statement each row change comes from (NULL for connection c: annotate OFF)."""
    rows_of = {"INSERT INTO dbt.t VALUES (1, 'a', 1), (2, 'b', 2)": 2,
               "UPDATE dbt.t SET n = n + 10 WHERE id <= 2": 2,
               "DELETE FROM dbt.t WHERE id IN (1, 4)": 2}
    out = []
    for who, sql in steps:
        if sql in ("BEGIN", "COMMIT"):
            continue
        out += [None if who == "c" else sql] * rows_of.get(sql, 1)
    return out


def _changes(spark, lake: Lake, table, cols, schema: str = DB) -> list[dict]:
    df = lake.read(spark, table).where("event_type IN ('INSERT', 'UPDATE', 'DELETE')").where(
        f"schema_name = '{schema}'")  # the server logs gold's writes too
    return [r.asDict() for r in df.orderBy("binlog_file", "start_pos", "row_in_event")
            .select(*cols).collect()]


def test_bronze_and_silver_carry_the_statements(spark, trail) -> None:
    lake = trail["lake"]
    for table in (BRONZE_EVENTS, SILVER_EVENTS):
        # the old table evolved: the declared columns, the new ones at the end
        have = spark.read.format("delta").load(lake.path(table)).columns
        assert set(NEW) <= set(have), table.key
        rows = _changes(spark, lake, table, ["query_text", "commit_ts_us", "connection_id"])
        # rows of the lake's old part read NULL, the rest the exact statements run
        assert [r["query_text"] for r in rows] == [None] * 4 + _expected(PART2), table.key
        assert all(r["commit_ts_us"] is None and r["connection_id"] is None for r in rows)
    # MariaDB logs the thread id with DDL: the CREATE TABLE ran on connection a.
    ddl = (lake.read(spark, BRONZE_EVENTS).where("event_type = 'QUERY' AND query LIKE "
                                                 "'CREATE TABLE dbt.t%'")
           .select("connection_id").collect())
    assert [r[0] for r in ddl] == [trail["ids"]["a"]]


def test_mariadb_binlog_logs_no_thread_id_for_row_transactions(trail) -> None:
    """What the NULLs rest on: mariadb-binlog shows the same statements, and no thread id
    inside a row transaction (GTID … trans up to COMMIT)."""
    files = sorted(trail["binlogs"].iterdir())
    out = subprocess.run(["mariadb-binlog", "-vv", "--base64-output=decode-rows",
                          *map(str, files)], capture_output=True, text=True, check=True).stdout
    statements, text, in_trx, transactions = [], None, False, 0
    for line in out.splitlines():
        if line.startswith("#Q> "):
            text = line[4:] if text is None else text + "\n" + line[4:]
            continue
        if text is not None:
            statements.append(text)
            text = None
        if "\tGTID " in line and line.endswith(" trans"):
            in_trx, transactions = True, transactions + 1
        elif line.startswith("COMMIT"):
            in_trx = False
        assert not (in_trx and "thread_id=" in line), line
    assert transactions >= 6
    # (gold's own INSERTs into dbt_gold on the same server quote these statements as values)
    assert [s for s in statements if "dbt.t" in s and "`binlog_events`" not in s] == [
        s for who, s in PART1 + PART2 if who != "c" and s not in ("BEGIN", "COMMIT")]


def test_gold_adds_the_columns_and_exports_once(spark, trail) -> None:
    server, dsn, root = trail["server"], trail["dsn"], trail["cfg"].lake.root
    assert main(["--lake", root, "gold", "--gold-dsn", dsn]) == 0
    assert main(["--lake", root, "gold", "--gold-dsn", dsn]) == 0  # nothing new: no-op
    assert main(["--lake", root, "init", "--gold-dsn", dsn]) == 0  # ALTER is idempotent
    cols = [r[0] for r in server.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'dbt_gold' "
        "AND TABLE_NAME = 'binlog_events' ORDER BY ORDINAL_POSITION")]
    assert cols[cols.index("schema_version") + 1:][:3] == GOLD_NEW
    rows = server.execute("SELECT query_text, query_hash, commit_ts_us, connection_id "
                          "FROM dbt_gold.binlog_events WHERE schema_name = 'dbt' "
                          "ORDER BY binlog_file, start_pos, row_in_event")
    # every silver row once; the old part was exported before the columns existed
    assert [r[0] for r in rows] == [None] * 4 + _expected(PART2)
    assert all(r[1] is None and r[2] is None and r[3] is None for r in rows)
    with pytest.raises(Exception, match="1305"):  # why query_hash is NULL on MariaDB
        server.execute("SELECT STATEMENT_DIGEST('SELECT 1')")


def test_query_shows_them_from_silver_and_gold(trail, capsys) -> None:
    root, dsn = trail["cfg"].lake.root, trail["dsn"]
    assert main(["--lake", root, "gold", "--gold-dsn", dsn]) == 0
    capsys.readouterr()
    for extra in ([], ["--gold-dsn", dsn]):
        assert main(["--lake", root, "query", "--table", "dbt.t", "--pk", "3", "--format",
                     "jsonl", *extra]) == 0
        changes = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [(c["event_type"], c["query_text"], c["commit_ts_us"], c["connection_id"])
                for c in changes] == [
            ("INSERT", "INSERT INTO dbt.t VALUES (3, 'c', 3)", None, None),
            ("UPDATE", "UPDATE dbt.t SET v = 'é\tx' /* a comment */\nWHERE id = 3", None, None),
        ], extra
        assert ("query_hash" in changes[0]) == bool(extra)
    assert main(["--lake", root, "query", "--table", "dbt.t", "--query-hash", "x"]) == 2
    assert "--query-hash is answered from gold only" in capsys.readouterr().err


def test_a_window_before_the_history_says_where_it_starts(trail, capsys) -> None:
    """Issue 11 §5: an empty result exits 0 and says so; before the history, where it starts."""
    root = trail["cfg"].lake.root
    for argv in (["query", "--table", "dbt.t", "--until", "2000-01-01 00:00:00"],
                 ["flashback", "--table", "dbt.t", "--until", "2000-01-01 00:00:00",
                  "--dry-run"]):
        assert main(["--lake", root, *argv]) == 0, argv
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert captured.out == "" and len(err.splitlines()) == 1, argv
        assert "no row changes match" in err and "history of dbt.t, which starts at 20" in err
    assert main(["--lake", root, "query", "--table", "dbt.t", "--connection-id", "424242"]) == 0
    assert capsys.readouterr().err.strip() == "query: no row changes match"


def test_mysql8_commit_time_and_session_reach_silver_and_gold(spark, mariadb, corpus,
                                                              tmp_path, capsys) -> None:
    """A MySQL 8.2 binlog of the corpus (no MySQL server here): every row change's
    commit_ts_us and connection_id in silver and gold equal what mysqlbinlog printed
    (original_committed_timestamp, the BEGIN's thread_id); --connection-id selects them."""
    import datetime as dt

    from pipelines.source.model import ColumnSchema, Snapshot, TableSchema
    from pipelines.silver.snapshot_store import save_snapshot
    from tests.binlog.test_decoder_dbtrail import RUST_US, _mysqlbinlog_changes

    name = "tests__events__8.0__31_update_rows_v2__binlog.000001"
    binlogs = tmp_path / "m8"
    binlogs.mkdir()
    shutil.copy(corpus / RUST_US / name, binlogs / "binlog.000001")
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake"),
                                         "bronze.statement_text": True})
    assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
    # MINIMAL metadata: the table is named by a snapshot (its CREATE TABLE, expected/…sql.sql)
    # taken after the DDL (the next transaction starts at 832).
    types = ["tinyint", "smallint", "mediumint", "int", "bigint", "tinyint"]
    table = TableSchema("test", "int_table", [
        ColumnSchema(f"col{i + 1}", i + 1, t, t, charset=None, collation=None, generated=False,
                     is_json=False, pk_ordinal=None) for i, t in enumerate(types)])
    save_snapshot(spark, cfg, Snapshot("s-m8", dt.datetime(2023, 12, 26), "default", 1, None,
                                       "8.2.0", "binlog.000001", 832, None,
                                       {("test", "int_table"): table}, []))
    assert run_silver(spark, cfg).quarantined == 0
    expected = [(ts, thread) for ts, _, thread in _mysqlbinlog_changes(
        corpus / RUST_US / "expected" / (name.rsplit("__", 1)[0] + "__dump.txt"))]
    silver = _changes(spark, Lake.of(cfg), SILVER_EVENTS, ["commit_ts_us", "connection_id"],
                      "test")
    assert expected and all(ts for ts, _ in expected)
    assert [(r["commit_ts_us"], r["connection_id"]) for r in silver] == expected
    # Gold: the exporter itself into one hourly partition (`binlake gold` would first add
    # every hour from 2023 to now: thousands of partitions for a 3-row test).
    from pipelines.gold.ddl import create_events_sql, hour_floor
    from pipelines.gold.exporter import ExportOptions, export_rows, sum_counts

    dsn = mariadb.dsn("dbt_gold_m8")
    mariadb.execute("DROP DATABASE IF EXISTS dbt_gold_m8")
    mariadb.execute("CREATE DATABASE dbt_gold_m8")
    try:
        first = Lake.of(cfg).read(spark, SILVER_EVENTS).agg({"event_timestamp": "min"}) \
            .collect()[0][0]
        mariadb.execute(create_events_sql(hour_floor(first), 1), db="dbt_gold_m8")
        done = sum_counts(export_rows(Lake.of(cfg).read(spark, SILVER_EVENTS), ExportOptions(
            dsn, "dbt_gold_m8", "load_data", 1000)).collect())
        assert done.rows_inserted == len(expected)
        gold = mariadb.execute("SELECT commit_ts_us, connection_id FROM dbt_gold_m8."
                               "binlog_events ORDER BY binlog_file, start_pos, row_in_event")
        assert [(int(a), int(b)) for a, b in gold] == expected
        capsys.readouterr()
        for extra in ([], ["--gold-dsn", dsn]):
            assert main(["--lake", cfg.lake.root, "query", "--schema", "test", "--format",
                         "jsonl", "--connection-id", str(expected[0][1]), *extra]) == 0
            got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
            assert [(c["commit_ts_us"], c["connection_id"]) for c in got] == expected, extra
            assert main(["--lake", cfg.lake.root, "query", "--schema", "test",
                         "--connection-id", "9", *extra]) == 0
            assert "no row changes match" in capsys.readouterr().err
    finally:
        mariadb.execute("DROP DATABASE IF EXISTS dbt_gold_m8")
