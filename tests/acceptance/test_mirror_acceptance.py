"""Issue 12 §1's proof: the mirror's tables against a real MariaDB server's SELECTs.

A throwaway MariaDB 10.11 runs the type-heavy mixed workload with its mid-stream ALTER, then
four more steps with schema changes (DECIMAL and INT widened, a column dropped, one added, INT
turned into VARCHAR), a primary-key update and duplicate rows in a table without a key. After
the workload and after each step the test records the server's ``SELECT`` of the tables and
its binlog position (a *moment*). Then:

- lake A is indexed and mirrored right after the workload, when the schema snapshot knows
  only that schema, and again after the steps: the second (incremental) run evolves the
  existing tables (a wider DECIMAL and INT, INT to string, a column added);
- the current tables equal the server's final tables value for value;
- each history table filtered at each moment equals the server's SELECT at that moment;
- lake B (same binlogs, no mirror yet) gets ``binlake mirror`` killed with SIGKILL mid-run,
  then re-run: its tables equal lake A's; one more run adds nothing. Lake C (the mirror of
  the first half) likewise, killed in the middle of its incremental run.
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
from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.lake.delta_ops import current_version
from pipelines.mirror.job import mirror_path, mirrored_tables, run_mirror
from pipelines.silver.job import run_silver
from pipelines.silver.naming import position_key
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import save_snapshot
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables, table_columns
from devtools.mixed_workload import WORKLOAD_TABLES, run_mixed_workload

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

ROOT = Path(__file__).resolve().parents[2]
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
     "UPDATE ops.heap SET v = 10 WHERE k = 'z'",  # ends a version step 1 opened
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
    lake_b, lake_c = tmp / "lake_b", tmp / "lake_c"
    with MariaDBServer(binlog_row_metadata="FULL",
                       extra_options={"tmpdir": str(tmp / "server_tmp")}) as server:
        dsn = Dsn.parse(server.dsn())

        def snap() -> None:
            snapshot, checks = take_snapshot(dsn, source_id=cfg.source.name, schemas=["shop", "ops"])
            save_snapshot(spark, cfg, snapshot, checks)

        def index() -> None:
            server.copy_closed_binlogs(binlogs)
            assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
            run_silver(spark, cfg)

        with server.connect() as conn:
            run_mixed_workload(conn, after_ddl=snap, alter_mid_stream=True)
            moments.append(_moment(conn, WORKLOAD_TABLES))
            snap()
            # The first half is mirrored before the steps' ALTERs happen (no snapshot knows
            # them yet): the second run must evolve the existing tables.
            index()
            assert run_mirror(spark, cfg).tables
            with conn.cursor() as cur:
                for step in STEPS:
                    for stmt in step:
                        cur.execute(stmt)
                    moments.append(_moment(conn, STEP_TABLES))
                    cur.execute("FLUSH BINARY LOGS")
            snap()
            final = _moment(conn, WORKLOAD_TABLES)
        index()
    # lake C: bronze + silver complete, the mirror of the first half (an incremental run is
    # due); lake B: the same without any mirror (a first run is due)
    shutil.copytree(cfg.lake_root, lake_c)
    shutil.copytree(cfg.lake_root, lake_b)
    for layer in ("mirror", "mirror_history", "mirror_state"):
        shutil.rmtree(lake_b / layer)
    res = run_mirror(spark, cfg)
    assert {t.name for t in res.tables if t.evolved} >= {"shop.orders", "shop.ints",
                                                         "shop.order_lines"}
    return cfg, moments, final, {"first": lake_b, "incremental": lake_c}


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


# The Spark type of every mirrored column after the workload and the steps (docs/mirror.md's
# table; the steps widened shop.orders.total and shop.ints.i, turned order_lines.qty into
# VARCHAR, dropped orders.note and added orders.region).
EXPECTED_TYPES = {
    "shop.ints": {"id": "int", "t": "tinyint", "tu": "smallint", "s": "smallint", "su": "int",
                  "m": "int", "mu": "int", "i": "bigint", "iu": "bigint", "b": "bigint",
                  "bu": "decimal(20,0)"},
    "shop.nums": {"id": "int", "price": "decimal(10,2)", "huge": "string", "f": "float",
                  "d": "double", "bit1": "bigint", "bit64": "decimal(20,0)", "y": "int"},
    "shop.times": {"id": "int", "d": "date", "t0": "string", "t6": "string",
                   "dt0": "timestamp_ntz", "dt3": "timestamp_ntz", "dt6": "timestamp_ntz",
                   "ts6": "timestamp", "ts0": "timestamp"},
    "shop.texts": {c: "string" for c in ("code", "c_latin", "v_latin", "c_utf", "v_utf", "v500",
                                         "txt", "mtxt")},
    "shop.blobs": {"id": "int", "blb": "binary", "vb": "binary", "b4": "binary",
                   "size": "string", "tags": "string", "doc": "string", "geo": "binary"},
    "shop.order_lines": {"line_no": "int", "sku": "string", "order_id": "decimal(20,0)",
                         "qty": "string", "note": "string"},
    "shop.orders": {"order_id": "decimal(20,0)", "customer": "string", "total": "decimal(14,3)",
                    "note": "string", "status": "string", "placed_at": "timestamp_ntz",
                    "flags": "string", "region": "string"},
    "ops.events": {"id": "decimal(20,0)", "kind": "string", "payload": "string",
                   "at": "timestamp"},
    "ops.heap": {"k": "string", "v": "int"},
}
CURRENT_META = {"__seq": "bigint", "__gtid": "string", "__event_timestamp": "timestamp"}
HISTORY_META = {"__START_AT": "bigint", "__END_AT": "bigint", "__start_timestamp": "timestamp",
                "__end_timestamp": "timestamp", "__event_type": "string",
                "__is_current": "boolean"}


def _types(df) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}


def test_current_tables_equal_the_server(spark, built) -> None:
    cfg, _, final, _ = built
    assert set(mirrored_tables(spark, cfg)) == {tuple(t.split(".")) for t in WORKLOAD_TABLES}
    for t in WORKLOAD_TABLES:
        df = spark.read.format("delta").load(mirror_path(cfg, "current", *t.split(".")))
        _compare(spark, df, final, t, "the current table")


def test_every_column_has_its_documented_spark_type(spark, built) -> None:
    cfg, _, _, _ = built
    assert set(EXPECTED_TYPES) == set(WORKLOAD_TABLES)
    for t, want in EXPECTED_TYPES.items():
        current = spark.read.format("delta").load(mirror_path(cfg, "current", *t.split(".")))
        assert _types(current) == {**want, **CURRENT_META}, t
        history = spark.read.format("delta").load(mirror_path(cfg, "history", *t.split(".")))
        assert _types(history) == {**want, **HISTORY_META}, t
    # The widening was an overwrite commit: the typing before it stays readable (versioned).
    orders = mirror_path(cfg, "current", "shop", "orders")
    typings = {_types(spark.read.format("delta").option("versionAsOf", v).load(orders))["total"]
               for v in range(current_version(orders) + 1)}
    assert {"decimal(10,2)", "decimal(14,3)"} <= typings


def _as_of(hist, seq: int):
    """The history filtered at a moment, as docs/mirror.md tells analysts to."""
    return hist.where(f"__START_AT <= {seq} AND (__END_AT IS NULL OR __END_AT > {seq})")


def test_history_at_each_moment_equals_the_server(spark, built) -> None:
    cfg, moments, _, _ = built
    assert len(moments) == 1 + len(STEPS)
    for i, m in enumerate(moments):
        for t in m["rows"]:
            hist = spark.read.format("delta").load(mirror_path(cfg, "history", *t.split(".")))
            _compare(spark, _as_of(hist, m["seq"]), m, t, f"history at moment {i}")
    hist = spark.read.format("delta").load(mirror_path(cfg, "history", "shop", "orders"))
    assert {"__START_AT", "__END_AT", "__start_timestamp", "__end_timestamp",
            "__event_type"} <= set(hist.columns)
    # order 9 became 500: its version is closed, 500's is open
    nine = hist.where("order_id = 9").collect()
    assert nine and all(r["__END_AT"] is not None for r in nine)


def _tables(spark, lake: Path) -> dict:
    """Every mirror table's column types and rows (column order aside: a table built in
    one run orders its columns by the latest snapshot, one evolved by a later run appends)."""
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    out = {}
    for s, t in mirrored_tables(spark, cfg):
        for kind in ("current", "history"):
            df = spark.read.format("delta").load(mirror_path(cfg, kind, s, t))
            out[(kind, s, t)] = (sorted(_types(df).items()),
                                 sorted(repr(sorted(r.asDict().items())) for r in df.collect()))
    return out


def _cli(lake: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake),
                             "mirror", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _log_files(lake: Path) -> dict[Path, list[str]]:
    """Every mirror table's Delta log files (the state's included)."""
    tables = [*lake.glob("mirror/*/*"), *lake.glob("mirror_history/*/*"),
              lake / "mirror_state" / "tables"]
    return {p: sorted(os.listdir(p / "_delta_log")) for p in tables
            if (p / "_delta_log").is_dir()}


def _merged(lake: Path, before: dict[Path, list[str]]) -> set[tuple[str, str]]:
    """(schema, table) of the history tables with a MERGE commit not in ``before``."""
    out = set()
    for p, files in _log_files(lake).items():
        if p.parent.parent.name != "mirror_history":
            continue
        for f in set(files) - set(before.get(p, [])):
            if f.endswith(".json") and '"operation":"MERGE"' in (p / "_delta_log" / f).read_text():
                out.add((p.parent.name, p.name))
    return out


@pytest.mark.parametrize("run", ["first", "incremental"])
def test_kill_9_mid_run_then_rerun_gives_the_same_tables(spark, built, run: str) -> None:
    cfg, _, _, lakes = built
    lake = lakes[run]
    before = _log_files(lake)
    proc = _cli(lake)
    deadline = time.monotonic() + 240
    # Kill after some history MERGEs, before the state commit. First run: three tables.
    # Incremental run: ops.heap's (the first table of the run), whose MERGE inserted a version
    # it also closed (in the closed partition: the re-run must not insert it again).
    while time.monotonic() < deadline and proc.poll() is None:
        merged = _merged(lake, before)
        if (len(merged) >= 3 if run == "first" else ("ops", "heap") in merged):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "mirror finished before it could be killed:\n" + proc.stdout.read()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    state = lake / "mirror_state" / "tables"
    assert _log_files(lake).get(state) == before.get(state)  # killed before the state commit
    rerun = _cli(lake)
    out, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, out
    assert _tables(spark, lake) == _tables(spark, Path(cfg.lake_root))
    logs = _log_files(lake)
    again = _cli(lake)
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0 and "0 row changes" in out and "up to date" in out, out
    assert _log_files(lake) == logs  # nothing written


def test_sql_registers_the_mirror_views(spark, built, capsys) -> None:
    from pipelines.cli.main import main

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
        _compare(spark, _as_of(hist, m["seq"]), m, "shop.items", f"history at moment {i}")
