"""Issue 11 against a real MariaDB: reconstruct equals the server's SELECT at several moments
(right before and after a mid-stream ALTER, from silver alone and from a `snapshot --data`
baseline), `query` answers a key's history, and a bad window of updates and deletes is flashed
back both by `mariadb-binlog --flashback` and by our script run through the `mariadb` client,
with a later change to one row reported as a conflict and left alone.

Truth is always the server's own SELECT (tests/support/replay.server_tables), recorded at each
moment with the columns the table had then; never our decoder.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.history.flashback import plan_flashback, render_script
from pipelines.history.reconstruct import HistoryStartError, reconstruct, resolve_point
from pipelines.history.selection import Selection
from pipelines.history.times import parse_gtid_set
from pipelines.silver.data_snapshot import take_data_snapshot
from pipelines.silver.job import run_silver
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import save_snapshot
from devtools.mariadb import MariaDBServer
from tests.support.replay import _canon, server_tables, table_columns
from devtools.mixed_workload import WORKLOAD_TABLES, run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

PAUSE = 1.1  # binlog timestamps have whole seconds: moments one second apart are distinct


def _moment(conn) -> dict:
    """The server's truth now: time, GTID position, binlog position, every table's rows."""
    with conn.cursor() as cur:
        cur.execute("SELECT UTC_TIMESTAMP(6), @@gtid_binlog_pos")
        at, gtid = cur.fetchone()
        cur.execute("SHOW MASTER STATUS")
        f, pos = cur.fetchone()[:2]
    cols = {t: table_columns(conn, *t.split(".")) for t in WORKLOAD_TABLES}
    time.sleep(PAUSE)
    return {"at": at, "gtid": gtid.split(",")[-1], "pos": f"{f}:{pos}", "cols": cols,
            "rows": server_tables(conn, WORKLOAD_TABLES)}


def _as_rows(cols, images) -> list[tuple]:
    out = []
    for image in images:
        values = json.loads(image, parse_float=Decimal)
        out.append(tuple(_canon(c, values.get(c["name"]), from_silver=True) for c in cols))
    return sorted(out, key=repr)


def _sql(conn, *statements) -> None:
    with conn.cursor() as cur:
        for s in statements:
            cur.execute(s)


def _bad_window(conn) -> None:
    """Updates and deletes over every hard type; several multi-statement transactions."""
    _sql(conn, "SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'")
    _sql(conn, "UPDATE shop.nums SET price = price * 2, f = f + 1, bit64 = 7, huge = 0 "
               "WHERE id IN (1, 2)", "DELETE FROM shop.nums WHERE id = 5")
    _sql(conn, "DELETE FROM shop.blobs WHERE id IN (1, 3, 5)")
    _sql(conn, "BEGIN", "UPDATE shop.texts SET c_latin = 'zzz', v_latin = 'new' "
                        "WHERE code = 'plain'",
         "DELETE FROM shop.texts WHERE code IN ('back\\\\slash', 'pipe|and\\\\both')", "COMMIT")
    _sql(conn, "UPDATE shop.times SET t0 = '12:00:00', t6 = '-00:00:00.5' WHERE id IN (1, 2, 5)",
         "DELETE FROM shop.times WHERE id = 3")
    _sql(conn, "BEGIN", "DELETE FROM shop.orders WHERE order_id BETWEEN 40 AND 60",
         "UPDATE shop.orders SET total = total + 1, flags = 'fragile' WHERE order_id < 10",
         "COMMIT")
    _sql(conn, "DELETE FROM shop.order_lines WHERE order_id = 3",
         "UPDATE shop.order_lines SET qty = qty + 10 WHERE order_id = 4",
         "UPDATE shop.order_lines SET line_no = line_no + 50 WHERE order_id = 6")  # key moves
    _sql(conn, "BEGIN", "DELETE FROM ops.heap WHERE v = 2", "UPDATE ops.heap SET v = 5 "
                                                            "WHERE k IS NULL",
         "DELETE FROM ops.events", "COMMIT")
    _sql(conn, "UPDATE shop.ints SET bu = 1, t = 0 WHERE id = 2", "DELETE FROM shop.ints "
                                                                  "WHERE id = 1")


def _index(spark, cfg, server: MariaDBServer, binlogs: Path, first: str | None = None) -> None:
    server.copy_closed_binlogs(binlogs, first)  # closed files only: a later run sees new ones
    res = run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
    assert not res.failed
    run_silver(spark, cfg)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    cfg = load_config(env={}, overrides={"lake.root": str(tmp / "lake")})
    cfg_b = load_config(env={}, overrides={"lake.root": str(tmp / "lake_b")})
    (tmp / "server_tmp").mkdir()
    # Its own tmpdir: other processes on this machine clean /tmp while the server uses it.
    with MariaDBServer(binlog_row_metadata="FULL",
                       extra_options={"tmpdir": str(tmp / "server_tmp")}) as server:
        dsn = Dsn.parse(server.dsn())
        with server.connect() as conn:
            run_mixed_workload(conn, alter_mid_stream=True)
            _sql(conn, "SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'")
            early = _moment(conn)
            _sql(conn, "UPDATE shop.orders SET status = 'paid', note = 'x' WHERE order_id < 5")
            server.flush_logs()
            first_b = server.binlog_files()[-1].name
            take_data_snapshot(spark, cfg_b, dsn, schemas=["shop", "ops"], batch_rows=50)
            baseline = _moment(conn)
            _sql(conn, "UPDATE shop.orders SET total = total * 3 WHERE order_id BETWEEN 5 AND 25",
                 "INSERT INTO ops.heap VALUES ('c', 3), ('c', 3)",
                 "DELETE FROM shop.order_lines WHERE order_id = 5")
            before_alter = _moment(conn)
            _sql(conn, "ALTER TABLE shop.orders ADD COLUMN extra INT NULL AFTER customer")
            after_alter = _moment(conn)
            _sql(conn, "UPDATE shop.orders SET extra = order_id * 2 WHERE order_id < 8",
                 "INSERT INTO shop.orders (order_id, customer, extra, total, placed_at) "
                 "VALUES (1000, 'new one', 7, '1.00', '2025-01-01 00:00:00')")
            before_bad = _moment(conn)
            _bad_window(conn)
            after_bad = _moment(conn)
            snapshot, checks = take_snapshot(dsn, source_id=cfg.source.name,
                                             schemas=["shop", "ops"])
            save_snapshot(spark, cfg, snapshot, checks)
            _index(spark, cfg, server, tmp / "binlogs")
            _index(spark, cfg_b, server, tmp / "binlogs_b", first=first_b)
            yield {"cfg": cfg, "cfg_b": cfg_b, "server": server, "conn": conn, "tmp": tmp,
                   "moments": {"early": early, "baseline": baseline,
                               "before_alter": before_alter, "after_alter": after_alter,
                               "before_bad": before_bad, "after_bad": after_bad}}


def _reconstructed(spark, cfg, table: str, point) -> list[str]:
    schema, name = table.split(".")
    rec = reconstruct(spark, cfg, schema, name, point)
    return [r["image"] for r in rec.images.collect()]


@pytest.mark.parametrize("moment", ["early", "before_alter", "after_alter", "after_bad"])
def test_reconstruct_at_time_equals_the_servers_select(spark, history, moment) -> None:
    m = history["moments"][moment]
    point = resolve_point(spark, history["cfg"], at=m["at"])
    for table in WORKLOAD_TABLES:
        got = _as_rows(m["cols"][table], _reconstructed(spark, history["cfg"], table, point))
        assert got == m["rows"][table], f"{table} at {moment}"


@pytest.mark.parametrize("kind", ["gtid", "pos"])
def test_reconstruct_at_gtid_and_position_around_the_alter(spark, history, kind) -> None:
    for moment in ("before_alter", "after_alter", "before_bad"):
        m = history["moments"][moment]
        point = resolve_point(spark, history["cfg"], **{kind: m[kind]})
        for table in ("shop.orders", "ops.heap", "shop.order_lines"):
            got = _as_rows(m["cols"][table],
                           _reconstructed(spark, history["cfg"], table, point))
            assert got == m["rows"][table], f"{table} at {moment} by {kind}"


def test_reconstruct_from_a_data_snapshot_baseline(spark, history, capsys) -> None:
    cfg_b = history["cfg_b"]
    for moment in ("baseline", "after_alter", "after_bad"):
        m = history["moments"][moment]
        point = resolve_point(spark, cfg_b, at=m["at"])
        for table in WORKLOAD_TABLES:
            got = _as_rows(m["cols"][table], _reconstructed(spark, cfg_b, table, point))
            assert got == m["rows"][table], f"{table} at {moment} from the baseline"
    early = history["moments"]["early"]
    with pytest.raises(HistoryStartError, match="before the history of shop.orders starts.*"
                                                "first baseline is"):
        reconstruct(spark, cfg_b, "shop", "orders",
                    resolve_point(spark, cfg_b, at=early["at"]))
    # The CLI says the same in one line, exit 2.
    code = main(["--lake", cfg_b.lake.root, "reconstruct", "--table", "shop.orders", "--at",
                 early["at"].isoformat(" ")])
    err = capsys.readouterr().err
    assert code == 2 and "first baseline is" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_reconstruct_cli_formats(spark, history, capsys) -> None:
    cfg, m = history["cfg"], history["moments"]["before_bad"]
    at = m["at"].isoformat(" ")
    assert main(["--lake", cfg.lake.root, "reconstruct", "--table", "shop.orders", "--at", at,
                 "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert _as_rows(m["cols"]["shop.orders"], lines) == m["rows"]["shop.orders"]
    assert list(json.loads(lines[0])) == [c["name"] for c in m["cols"]["shop.orders"]]
    # sql: the INSERTs, run into an empty copy of the table, give the same rows back.
    assert main(["--lake", cfg.lake.root, "reconstruct", "--table", "shop.blobs", "--at", at,
                 "--format", "sql"]) == 0
    script = capsys.readouterr().out
    conn = history["conn"]
    _sql(conn, "DROP DATABASE IF EXISTS copy", "CREATE DATABASE copy",
         "CREATE TABLE copy.blobs LIKE shop.blobs")
    _client(history["server"], script.replace("`shop`.`blobs`", "`copy`.`blobs`"))
    assert server_tables(conn, ["copy.blobs"])["copy.blobs"] == m["rows"]["shop.blobs"]
    # --out: a Delta table with the columns at that point.
    out = str(history["tmp"] / "orders_out")
    assert main(["--lake", cfg.lake.root, "reconstruct", "--table", "shop.orders", "--at", at,
                 "--out", out]) == 0
    df = spark.read.format("delta").load(out)
    assert df.columns == [c["name"] for c in m["cols"]["shop.orders"]]
    assert df.count() == len(m["rows"]["shop.orders"])
    assert "row(s) ->" in capsys.readouterr().out
    # --pk: one row.
    assert main(["--lake", cfg.lake.root, "reconstruct", "--table", "shop.orders", "--at", at,
                 "--pk", "3", "--format", "csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split(",")[:3] == ["order_id", "customer", "extra"] and len(rows) == 2
    assert rows[1].startswith("3,")


def test_query_one_keys_history(spark, history, capsys) -> None:
    cfg = history["cfg"]
    assert main(["--lake", cfg.lake.root, "query", "--table", "shop.orders", "--pk", "3",
                 "--format", "jsonl"]) == 0
    changes = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [c["event_type"] for c in changes][0] == "INSERT"
    assert [c["seq"] for c in changes] == sorted(c["seq"] for c in changes)
    assert set(changes[0]) == {"seq", "event_timestamp", "gtid", "event_type", "pk_values",
                               "changed_columns", "row_before", "row_after", "connection_id",
                               "commit_ts_us", "query_text"}
    assert isinstance(changes[0]["row_after"], dict) and changes[0]["pk_values"] == "3"
    # Folding the key's history gives the row as the server has it now.
    last = changes[-1]["row_after"]
    now = [r for r in history["moments"]["after_bad"]["rows"]["shop.orders"] if r[0] == 3]
    cols = history["moments"]["after_bad"]["cols"]["shop.orders"]
    assert _as_rows(cols, [json.dumps(last)]) == now
    # --changed / --where / --since / --event-type / --limit
    since = history["moments"]["after_alter"]["at"].isoformat(" ")
    assert main(["--lake", cfg.lake.root, "query", "--table", "shop.orders", "--changed",
                 "extra", "--since", since, "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("seq,event_timestamp") and len(out) == 1 + 7
    assert main(["--lake", cfg.lake.root, "query", "--table", "shop.orders", "--where",
                 "customer=new one", "--event-type", "INSERT"]) == 0
    out = capsys.readouterr().out
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()
             if line.startswith("|")]
    types = [row[cells[0].index("event_type")] for row in cells[1:]]
    assert "new one" in out and types == ["INSERT"]
    assert main(["--lake", cfg.lake.root, "query", "--table", "shop.orders", "--limit", "2",
                 "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    # --gtid: exactly the changes of that transaction (the 200-order one), any table.
    gtid = changes[0]["gtid"]
    assert main(["--lake", cfg.lake.root, "query", "--schema", "shop", "--gtid", gtid,
                 "--format", "jsonl"]) == 0
    txn = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(txn) == 200 and {c["gtid"] for c in txn} == {gtid}
    # --until with an offset: the same instant written in UTC+02:00.
    until = history["moments"]["early"]["at"].replace(microsecond=0) + dt.timedelta(hours=2)
    assert main(["--lake", cfg.lake.root, "query", "--table", "shop.orders", "--pk", "3",
                 "--until", until.isoformat() + "+02:00", "--format", "jsonl"]) == 0
    early = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert 0 < len(early) < len(changes) and early == changes[:len(early)]


def test_query_errors_are_one_line(history, capsys) -> None:
    root = history["cfg"].lake.root
    cases = [
        (["query", "--table", "shop.nope"], "unknown table", 2),
        (["query", "--table", "shop.orders", "--changed", "nope"], "unknown column 'nope'", 2),
        (["query", "--table", "shop.orders", "--since", "yesterday"], "--since 'yesterday'", 2),
        (["sql", "SELEC 1"], "bad SQL", 1),
        (["sql", "SELECT nope FROM silver_binlog_events"], "bad SQL", 1),
        (["flashback", "--table", "shop.nope", "--dry-run"], "unknown table", 2),
        (["flashback", "--dry-run"], "flashback needs a selection", 2),
        (["reconstruct", "--table", "shop.nope", "--pos", "mariadb-bin.000001:4"],
         "unknown table", 2),
        (["reconstruct", "--table", "shop.orders", "--pos", "mariadb-bin:4"], "--pos", 2),
        (["reconstruct", "--table", "shop.orders", "--gtid", "0-1-999999"],
         "no event of that transaction", 2),
        (["reconstruct", "--table", "shop.orders", "--pos", "mariadb-bin.000001:4"],
         "before the history of shop.orders starts", 2),
    ]
    for argv, text, code in cases:
        assert main(["--lake", root, *argv]) == code, argv
        err = capsys.readouterr().err
        assert text in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["--lake", root, "query", "--table", "shop.orders", "--pk", "424242"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no row changes match" in captured.err


def _client(server: MariaDBServer, script: str) -> None:
    """Run a script through the `mariadb` command-line client, as a person would."""
    dsn = Dsn.parse(server.dsn())
    env = dict(os.environ, MYSQL_PWD=dsn.password)
    subprocess.run(["mariadb", "-h", "127.0.0.1", "-P", str(dsn.port), "-u", dsn.user],
                   input=script.encode("utf-8"), env=env, check=True, capture_output=True)


def _gtids_between(a: str, b: str) -> str:
    domain, server_id, first = a.split("-")
    last = int(b.split("-")[2])
    return ",".join(f"{domain}-{server_id}-{n}" for n in range(int(first) + 1, last + 1))


def test_flashback_restores_the_window_like_mariadb_binlog(spark, history) -> None:
    server, conn, cfg = history["server"], history["conn"], history["cfg"]
    before, after = history["moments"]["before_bad"], history["moments"]["after_bad"]
    # 1. MariaDB's own tool restores the bad window (from its binlog positions).
    f_a, p_a = before["pos"].split(":")
    f_b, p_b = after["pos"].split(":")
    assert f_a == f_b
    tool = subprocess.run(["mariadb-binlog", "--flashback", f"--start-position={p_a}",
                           f"--stop-position={p_b}", str(server.binlog_dir / f_a)],
                          check=True, capture_output=True).stdout.decode("utf-8")
    _client(server, tool)
    assert server_tables(conn, WORKLOAD_TABLES) == before["rows"]
    # 2. The same bad statements again (new GTIDs), then a later change to one of its rows.
    _sql(conn, "SELECT 1")
    with conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        g_a = cur.fetchone()[0]
    _bad_window(conn)
    assert server_tables(conn, WORKLOAD_TABLES) == after["rows"]
    with conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        g_b = cur.fetchone()[0]
    _sql(conn, "UPDATE shop.orders SET customer = 'later' WHERE order_id = 5")
    expected = dict(before["rows"])
    expected["shop.orders"] = sorted(
        [r for r in before["rows"]["shop.orders"] if r[0] != 5]
        + [r for r in server_tables(conn, ["shop.orders"])["shop.orders"] if r[0] == 5],
        key=repr)
    _index(spark, cfg, server, history["tmp"] / "binlogs")
    # 3. Ours: the conflict is reported and left out, the script runs in the client as is.
    sel = Selection(gtids=parse_gtid_set(_gtids_between(g_a, g_b)))
    plan = plan_flashback(spark, cfg, sel)
    assert [(c.table, c.key) for c in plan.conflicts] == [(("shop", "orders"), "5")]
    script = render_script(plan)
    assert "X'" in script and "CAST(" in script and "START TRANSACTION" in script
    _client(server, script)
    assert server_tables(conn, WORKLOAD_TABLES) == expected


def test_flashback_dry_run_lists_the_conflict(spark, history, capsys) -> None:
    cfg = history["cfg"]
    since = history["moments"]["before_bad"]["at"].isoformat(" ")
    until = history["moments"]["after_bad"]["at"].isoformat(" ")
    assert main(["--lake", cfg.lake.root, "flashback", "--table", "shop.orders", "--since",
                 since, "--until", until, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "change(s) selected" in out


def test_query_gold_answers_like_silver(history, capsys) -> None:
    root, dsn = history["cfg"].lake.root, history["server"].dsn("binlake_gold")
    assert main(["--lake", root, "init", "--gold-dsn", dsn]) == 0
    assert main(["--lake", root, "gold", "--gold-dsn", dsn]) == 0
    capsys.readouterr()

    def changes(*extra):
        assert main(["--lake", root, "query", "--format", "jsonl", *extra]) == 0
        return [json.loads(x, parse_float=Decimal) for x in capsys.readouterr().out.splitlines()]

    for selection in (["--table", "shop.orders", "--pk", "3"],
                      ["--table", "shop.texts", "--pk", "a\\|b"],  # pk_values form: INSERT, key UPDATE
                      ["--table", "shop.blobs", "--event-type", "DELETE"]):
        silver = changes(*selection)
        gold = changes(*selection, "--gold-dsn", dsn)
        assert silver and [
            (c["seq"], c["gtid"], c["event_type"], c["pk_values"], c["row_before"],
             c["row_after"]) for c in gold] == [
            (c["seq"], c["gtid"], c["event_type"], c["pk_values"], c["row_before"],
             c["row_after"]) for c in silver], selection
