"""Issue 12 §1's proof: the mirror's tables against a real MariaDB server's SELECTs.

A throwaway MariaDB 10.11 runs the type-heavy mixed workload with its mid-stream ALTER, then
four more steps with schema changes (DECIMAL and INT widened, a column dropped, one added, INT
turned into VARCHAR), a primary-key update and duplicate rows in a table without a key. After
the workload and after each step the test records the server's ``SELECT`` of the tables and
its binlog position (a *moment*). Then:

- lake A is indexed in two halves with a mirror run after each (incremental path);
- the current tables equal the server's final tables value for value;
- each history table filtered at each moment equals the server's SELECT at that moment;
- lake B (same binlogs) gets ``binlake mirror`` killed with SIGKILL mid-run, then re-run:
  its tables equal lake A's; one more run adds nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from decimal import Context, Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import Dsn, load_config
from pipelines.mirror.job import mirror_path, mirrored_tables, run_mirror
from pipelines.silver.job import run_silver
from pipelines.silver.naming import position_key
from pipelines.silver.snapshot_source import take_snapshot
from pipelines.silver.snapshot_store import save_snapshot
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables, table_columns
from tests.support.workload import WORKLOAD_TABLES, run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

ROOT = Path(__file__).resolve().parents[1]
STEP_TABLES = ("shop.orders", "shop.ints", "shop.order_lines", "ops.heap")
STEPS = [
    ["UPDATE shop.orders SET total = total + 1 WHERE order_id <= 5",
     "DELETE FROM shop.order_lines WHERE order_id = 3",
     "INSERT INTO ops.heap (k, v) VALUES ('a', 1), ('z', 9)"],
    ["ALTER TABLE shop.orders MODIFY total DECIMAL(14,3) NOT NULL",
     "ALTER TABLE shop.ints MODIFY i BIGINT NULL",
     "UPDATE shop.orders SET total = total * 2 + 0.001 WHERE order_id BETWEEN 3 AND 8",
     "UPDATE shop.ints SET i = 9000000000 WHERE id = 1"],
    ["ALTER TABLE shop.orders DROP COLUMN note",
     "ALTER TABLE shop.orders ADD COLUMN region VARCHAR(10) NULL",
     "INSERT INTO shop.orders (order_id, customer, total, placed_at) "
     "VALUES (777, 'new', 1.5, '2024-05-05 05:05:05.5')",
     "UPDATE shop.orders SET region = 'eu' WHERE order_id IN (1, 2)",
     "DELETE FROM ops.heap WHERE k = 'a' LIMIT 1",
     "UPDATE shop.orders SET order_id = 500 WHERE order_id = 9"],
    ["ALTER TABLE shop.order_lines MODIFY qty VARCHAR(10) NOT NULL",
     "UPDATE shop.order_lines SET qty = 'x7' WHERE order_id = 4"],
]


def _moment(conn, tables) -> dict:
    """The server's binlog position (as a seq bound) and its tables at this moment."""
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATETIME_PRECISION "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA IN ('shop', 'ops')")
        fsp = {(f"{r[0]}.{r[1]}", r[2]): r[3] or 0 for r in cur.fetchall()}
    return {"seq": position_key(file, pos), "rows": server_tables(conn, tables),
            "cols": {t: table_columns(conn, *t.split(".")) for t in tables}, "fsp": fsp}


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mirror")
    cfg = load_config(env={}, overrides={"lake.root": str(tmp / "lake_a")})
    binlogs = tmp / "binlogs"
    binlogs.mkdir()
    moments = []
    (tmp / "server_tmp").mkdir()  # the server's temporary tables, away from a shared /tmp
    with MariaDBServer(binlog_row_metadata="FULL",
                       extra_options={"tmpdir": str(tmp / "server_tmp")}) as server:
        dsn = Dsn.parse(server.dsn())

        def snap() -> None:
            snapshot, checks = take_snapshot(dsn, source_id=cfg.source.name, schemas=["shop", "ops"])
            save_snapshot(spark, cfg, snapshot, checks)

        with server.connect() as conn:
            run_mixed_workload(conn, after_ddl=snap, alter_mid_stream=True)
            moments.append(_moment(conn, WORKLOAD_TABLES))
            with conn.cursor() as cur:
                for step in STEPS:
                    for stmt in step:
                        cur.execute(stmt)
                    moments.append(_moment(conn, STEP_TABLES))
                    cur.execute("FLUSH BINARY LOGS")
        server.flush_logs()
        snap()
        with server.connect() as conn:
            final = _moment(conn, WORKLOAD_TABLES)
        files = server.binlog_files()
        for f in files:
            shutil.copy(f, binlogs / f.name)
    names = [f.name for f in files]
    half = len(names) // 2
    lake_b = tmp / "lake_b"
    for part in (names[:half], names):
        assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), files=part).failed
        run_silver(spark, cfg)
        if part is names:
            shutil.copytree(cfg.lake_root, lake_b)  # bronze + silver, mirror half-done
            shutil.rmtree(lake_b / "mirror", ignore_errors=True)
            shutil.rmtree(lake_b / "mirror_history", ignore_errors=True)
            shutil.rmtree(lake_b / "mirror_state", ignore_errors=True)
        res = run_mirror(spark, cfg)
        assert res.tables
    return cfg, moments, final, lake_b


def _session_tz(spark) -> ZoneInfo:
    return ZoneInfo(spark.conf.get("spark.sql.session.timeZone") or "UTC")


_EXACT = Context(prec=200)


def _canon_server(col: dict, value, fsp: int):
    """The server's canonical value, with MySQL zero dates as NULL (docs/mirror.md); numbers
    by value (a widened DECIMAL holds 1.50 for 1.5)."""
    if value is not None and col["type"] == "decimal":
        return _EXACT.normalize(Decimal(value))
    if value is None or col["type"] not in ("date", "datetime", "timestamp"):
        return value
    date = value[:10]
    return None if date.startswith("0000") or "-00" in date else value


def _canon_mirror(col: dict, value, fsp: int, tz: ZoneInfo):
    """A mirror value in :func:`tests.support.replay.server_tables`' canonical form."""
    if value is None:
        return None
    t = col["type"]
    if col["json"]:
        return json.loads(value, parse_float=Decimal)
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint", "bit", "year"):
        return int(value)
    if t == "float":
        return struct.pack("<f", value)
    if t == "double":
        return float(value)
    if t == "decimal":
        return _EXACT.normalize(Decimal(value))
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dt.datetime):
        if t == "timestamp":
            value = value.replace(tzinfo=value.tzinfo or tz).astimezone(dt.timezone.utc)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{value.microsecond:06d}"[:fsp + 1] if fsp else "")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _compare(spark, df, moment: dict, table: str, what: str) -> None:
    cols = moment["cols"][table]
    fsp = {c["name"]: moment["fsp"][(table, c["name"])] for c in cols}
    tz = _session_tz(spark)
    got = sorted((tuple(_canon_mirror(c, r[c["name"]], fsp[c["name"]], tz) for c in cols)
                  for r in df.select(*[f"`{c['name']}`" for c in cols]).collect()), key=repr)
    want = sorted((tuple(_canon_server(c, v, fsp[c["name"]]) for c, v in zip(cols, row))
                   for row in moment["rows"][table]), key=repr)
    assert got == want, f"{table}: {what} differs from the server's SELECT"


def test_current_tables_equal_the_server(spark, built) -> None:
    cfg, _, final, _ = built
    assert set(mirrored_tables(spark, cfg)) == {tuple(t.split(".")) for t in WORKLOAD_TABLES}
    for t in WORKLOAD_TABLES:
        df = spark.read.format("delta").load(mirror_path(cfg, "current", *t.split(".")))
        _compare(spark, df, final, t, "the current table")
    orders = spark.read.format("delta").load(mirror_path(cfg, "current", "shop", "orders"))
    types = dict((f.name, f.dataType.simpleString()) for f in orders.schema.fields)
    assert types["order_id"] == "decimal(20,0)" and types["total"] == "decimal(14,3)"
    assert types["placed_at"] == "timestamp_ntz" and types["note"] == "string"
    assert {"__seq", "__gtid", "__event_timestamp", "region"} <= set(types)
    lines = spark.read.format("delta").load(mirror_path(cfg, "current", "shop", "order_lines"))
    assert dict((f.name, f.dataType.simpleString()) for f in lines.schema.fields)["qty"] == "string"


def test_history_at_each_moment_equals_the_server(spark, built) -> None:
    cfg, moments, _, _ = built
    assert len(moments) == 1 + len(STEPS)
    for i, m in enumerate(moments):
        for t in m["rows"]:
            hist = spark.read.format("delta").load(mirror_path(cfg, "history", *t.split(".")))
            at = hist.where(f"__START_AT < {m['seq']} AND (__END_AT IS NULL OR __END_AT >= {m['seq']})")
            _compare(spark, at, m, t, f"history at moment {i}")
    hist = spark.read.format("delta").load(mirror_path(cfg, "history", "shop", "orders"))
    assert {"__START_AT", "__END_AT", "__start_timestamp", "__end_timestamp",
            "__event_type"} <= set(hist.columns)
    # order 9 became 500: its version is closed, 500's is open
    nine = hist.where("order_id = 9").collect()
    assert nine and all(r["__END_AT"] is not None for r in nine)


def _tables(spark, lake: Path) -> dict:
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    out = {}
    for s, t in mirrored_tables(spark, cfg):
        for kind in ("current", "history"):
            df = spark.read.format("delta").load(mirror_path(cfg, kind, s, t))
            out[(kind, s, t)] = sorted(map(repr, df.collect()))
    return out


def _cli(lake: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "--lake", str(lake),
                             "mirror", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_kill_9_mid_run_then_rerun_gives_the_same_tables(spark, built) -> None:
    cfg, _, _, lake_b = built
    proc = _cli(lake_b)
    deadline = time.monotonic() + 240
    # kill once a few tables have been written, before the state commit
    while time.monotonic() < deadline and proc.poll() is None:
        done = list((lake_b / "mirror_history").glob("*/*/_delta_log/00000000000000000001.json"))
        if len(done) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "mirror finished before it could be killed:\n" + proc.stdout.read()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (lake_b / "mirror_state" / "tables").exists()  # killed before the state commit
    rerun = _cli(lake_b)
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out
    assert _tables(spark, lake_b) == _tables(spark, Path(cfg.lake_root))
    versions = {p: sorted(os.listdir(p / "_delta_log"))
                for p in (lake_b / "mirror_history").glob("*/*")}
    again = _cli(lake_b)
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0 and "0 row changes" in out and "up to date" in out, out
    assert versions == {p: sorted(os.listdir(p / "_delta_log"))
                        for p in (lake_b / "mirror_history").glob("*/*")}


def test_sql_registers_the_mirror_views(spark, built, capsys) -> None:
    from pipelines.cli import main

    cfg, _, final, _ = built
    assert main(["--lake", cfg.lake_root, "sql",
                 "SELECT count(*) AS n FROM shop__orders"]) == 0
    assert f"| {len(final['rows']['shop.orders'])} " in capsys.readouterr().out
    assert main(["--lake", cfg.lake_root, "sql",
                 "SELECT count(*) AS open FROM shop__orders__history WHERE __END_AT IS NULL"]) == 0
    assert f"| {len(final['rows']['shop.orders'])} " in capsys.readouterr().out


MINIMAL_STEPS = [
    ["INSERT INTO shop.items (id, name, qty, note, body) VALUES "
     "(1, 'a', 1, 'n1', 'x'), (2, 'b', 2, NULL, 'y'), (3, 'c', 3, 'n3', NULL)"],
    ["UPDATE shop.items SET qty = qty + 10 WHERE id IN (1, 2)",
     "UPDATE shop.items SET note = 'late' WHERE id = 3"],
    ["UPDATE shop.items SET body = 'z', name = 'bb' WHERE id = 2",
     "DELETE FROM shop.items WHERE id = 1",
     "INSERT INTO shop.items (id, name, qty) VALUES (4, 'd', 4)",
     "UPDATE shop.items SET qty = 0 WHERE id = 4"],
]


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_partial_row_images_keep_the_previous_values(spark, tmp_path: Path, image: str) -> None:
    """binlog_row_image=MINIMAL/NOBLOB: a column an UPDATE's image leaves out keeps its value
    (in both tables), mirrored in two runs so the value also comes from the current table."""
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    (tmp_path / "server_tmp").mkdir()
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    tables = ("shop.items",)
    moments = []
    with MariaDBServer(binlog_row_metadata="FULL", extra_options={
            "binlog-row-image": image, "tmpdir": str(tmp_path / "server_tmp")}) as server:
        dsn = Dsn.parse(server.dsn())
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(10), "
                        "qty INT, note VARCHAR(10), body BLOB)")
            snapshot, checks = take_snapshot(dsn, source_id=cfg.source.name, schemas=["shop"])
            save_snapshot(spark, cfg, snapshot, checks)
            for step in MINIMAL_STEPS:
                for stmt in step:
                    cur.execute(stmt)
                moments.append(_moment(conn, tables))
                cur.execute("FLUSH BINARY LOGS")
        files = server.binlog_files()
        for f in files:
            shutil.copy(f, binlogs / f.name)
    names = [f.name for f in files]
    for part in (names[:2], names):
        run_bronze(spark, cfg, binlog_dir=str(binlogs), files=part)
        run_silver(spark, cfg)
        run_mirror(spark, cfg)
    silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
    assert silver.where("absent_columns IS NOT NULL").count() > 0  # the images were partial
    current = spark.read.format("delta").load(mirror_path(cfg, "current", "shop", "items"))
    _compare(spark, current, moments[-1], "shop.items", "the current table")
    hist = spark.read.format("delta").load(mirror_path(cfg, "history", "shop", "items"))
    for i, m in enumerate(moments):
        at = hist.where(f"__START_AT < {m['seq']} AND (__END_AT IS NULL OR __END_AT >= {m['seq']})")
        _compare(spark, at, m, "shop.items", f"history at moment {i}")
