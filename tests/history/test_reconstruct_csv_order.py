"""Issue 42 §4 against a real MariaDB: `reconstruct --format csv` lists rows in the order of the
key columns' values in their types (1, 2, 10, 100, not 1, 10, 100, 2), composite keys too, as
the server's own `SELECT ... ORDER BY <key>` does; `mirror` on a first run says "from the
start" as gold does, not "silver version -1 -> 0"."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from devtools.mariadb import MariaDBServer
from pipelines.bronze.job import run_bronze
from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.silver.job import run_silver

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

KEYS = [1, 2, 9, 10, 11, 100, 101, -3, 1000]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("csv_order")
    cfg = load_config(env={}, overrides={"lake.root": str(tmp / "lake")})
    (tmp / "server_tmp").mkdir()
    with MariaDBServer(binlog_row_metadata="FULL",
                       extra_options={"tmpdir": str(tmp / "server_tmp")}) as server:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.n (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.executemany("INSERT INTO shop.n VALUES (%s, %s)",
                            [(k, f"v{k}") for k in KEYS])
            cur.execute("CREATE TABLE shop.c (a BIGINT UNSIGNED, b SMALLINT, v DECIMAL(30,0), "
                        "PRIMARY KEY (a, b))")
            cur.executemany("INSERT INTO shop.c VALUES (%s, %s, %s)",
                            [(a, b, a * b) for a in (10, 2, 18446744073709551615)
                             for b in (10, 9, -1)])
            truth = {}
            for table, key in (("n", "id"), ("c", "a, b")):
                cur.execute(f"SELECT * FROM shop.{table} ORDER BY {key}")
                truth[table] = [[str(x) for x in row] for row in cur.fetchall()]
            cur.execute("SELECT UTC_TIMESTAMP(6)")
            at = cur.fetchone()[0]
        binlogs = tmp / "binlogs"
        server.copy_closed_binlogs(binlogs)
        assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
        run_silver(spark, cfg)
        yield cfg, truth, at.isoformat(" ")


@pytest.mark.parametrize("table", ["n", "c"])
def test_csv_rows_follow_the_servers_key_order(lake, table, capsys) -> None:
    cfg, truth, at = lake
    assert main(["--lake", cfg.lake.root, "reconstruct", "--table", f"shop.{table}", "--at", at,
                 "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[1:] == truth[table]


def test_mirror_first_run_says_from_the_start(lake, capsys) -> None:
    cfg, _, _ = lake
    assert main(["--lake", cfg.lake.root, "mirror"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "from the start" in last and "-1" not in last, last
    assert main(["--lake", cfg.lake.root, "mirror"]) == 0
    again = capsys.readouterr().out.strip().splitlines()[-1]
    assert "-1" not in again, again
