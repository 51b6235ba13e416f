"""Gold on the source server (issue 42, part 3): gold's own writes are binlogged by the server
whose binlogs binlake indexes. On a real MariaDB that is both:

* ``source.dsn`` and ``gold.dsn`` name one server: ``init`` and ``gold`` warn, and indexing
  leaves gold's database out (bronze, silver, mirror hold only the source's own schemas) while
  the server's binlogs do hold gold's writes; gold holds every silver row exactly once;
* binlogs read from files only (no ``source.dsn``): ``gold`` warns once silver holds rows of
  gold's database, and ``source.exclude_schemas`` leaves them out.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from devtools.mariadb import MariaDBServer
from pipelines.bronze.excluded import drop_schemas, same_server
from pipelines.mysql.dsn import Dsn

GOLD_DB = "binlake_gold"


def _workload(server: MariaDBServer, first: int, n: int) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS shop")
        cur.execute("CREATE TABLE IF NOT EXISTS shop.items (id INT PRIMARY KEY, qty INT)")
        cur.executemany("INSERT INTO shop.items VALUES (%s, %s)",
                        [(i, i % 5) for i in range(first, first + n)])
        cur.execute("UPDATE shop.items SET qty = qty + 1 WHERE id >= %s", (first,))
        conn.commit()


def _binlake(*args: str) -> int:
    from pipelines.cli.main import main

    return main(list(args))


def _schemas(spark, lake: str, layer: str, name: str) -> set[str]:
    return {r[0] for r in spark.read.format("delta").load(f"{lake}/{layer}/{name}")
            .where("schema_name IS NOT NULL AND event_type IN ('INSERT', 'UPDATE', 'DELETE')")
            .select("schema_name").distinct().collect()}


@pytest.mark.spark
@pytest.mark.mariadb
def test_gold_on_the_source_server_is_left_out_of_indexing(spark, tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    lake, binlogs = str(tmp_path / "lake"), tmp_path / "binlogs"
    with MariaDBServer() as server:
        monkeypatch.setenv("BINLAKE_SOURCE_DSN", server.dsn())
        monkeypatch.setenv("BINLAKE_GOLD_DSN", server.dsn(GOLD_DB))
        _workload(server, 1, 40)
        assert _binlake("--lake", lake, "init", "--partitions", "4") == 0
        err = capsys.readouterr().err
        assert f"gold's database '{GOLD_DB}' is on the source server (127.0.0.1:" \
               f"{server.port})" in err and server.dsn() not in err
        copied = server.copy_closed_binlogs(binlogs)
        assert _binlake("--lake", lake, "index", "--binlog-dir", str(binlogs), "--all") == 0
        assert _binlake("--lake", lake, "gold") == 0
        assert "is on the source server" in capsys.readouterr().err
        # the next binlogs hold gold's export (its rows of binlog_events and its state)
        _workload(server, 1000, 25)
        server.copy_closed_binlogs(binlogs, first=copied[-1].name)
        assert _binlake("--lake", lake, "index", "--binlog-dir", str(binlogs), "--all",
                        "--mirror") == 0
        assert _binlake("--lake", lake, "gold") == 0
        gold_rows = server.execute(f"SELECT COUNT(*) FROM {GOLD_DB}.binlog_events")[0][0]
        logged = [r for r in server.execute("SHOW BINLOG EVENTS IN %s", (copied[-1].name,))
                  if "binlog_events" in str(r[-1])]
        assert logged, "the server binlogged gold's writes (the table map of binlog_events)"

        assert _schemas(spark, lake, "bronze", "binlog_events") == {"shop"}
        assert _schemas(spark, lake, "silver", "binlog_events") == {"shop"}
        silver = spark.read.format("delta").load(f"{lake}/silver/binlog_events").count()
        assert silver == 2 * (40 + 25) and gold_rows == silver
        mirror = {p.name for p in (Path(lake) / "mirror").iterdir()} \
            if (Path(lake) / "mirror").exists() else set()
        assert mirror and not any(GOLD_DB in m for m in mirror), mirror

        # Files only (no source.dsn): binlake cannot tell the server; gold says what it sees,
        # and source.exclude_schemas leaves gold's database out.
        monkeypatch.delenv("BINLAKE_SOURCE_DSN")
        files_lake = str(tmp_path / "files-lake")
        assert _binlake("--lake", files_lake, "index", "--binlog-dir", str(binlogs), "--all") == 0
        assert GOLD_DB in _schemas(spark, files_lake, "silver", "binlog_events")
        other = "binlake_gold_2"
        monkeypatch.setenv("BINLAKE_GOLD_DSN", server.dsn(other))
        monkeypatch.setenv("BINLAKE_GOLD_PARTITIONS", "4")
        capsys.readouterr()
        assert _binlake("--lake", files_lake, "gold") == 0
        assert f"silver holds row changes of {other!r}" not in capsys.readouterr().err
        monkeypatch.setenv("BINLAKE_GOLD_DSN", server.dsn(GOLD_DB))
        excluded_lake = str(tmp_path / "excluded-lake")
        assert _binlake("--lake", files_lake, "gold") == 0
        assert f"silver holds row changes of '{GOLD_DB}', gold's own database" in \
            capsys.readouterr().err
        monkeypatch.setenv("BINLAKE_SOURCE_EXCLUDE_SCHEMAS", f"{GOLD_DB}, nothing_else")
        assert _binlake("--lake", excluded_lake, "index", "--binlog-dir", str(binlogs),
                        "--all") == 0
        assert _schemas(spark, excluded_lake, "silver", "binlog_events") == {"shop"}


@pytest.mark.parametrize("a, b, same", [
    ("mysql://u@127.0.0.1:3306/x", "mysql://u@localhost/y", True),
    ("mysql://u@127.0.0.1:3306/x", "mysql://u@127.0.0.1:3307/x", False),
    ("mysql://u@db1:3306/", "mysql://v@DB1:3306/binlake", True),
    ("mysql://u@db1:3306/", "mysql://u@db2:3306/", False),
])
def test_same_server(a: str, b: str, same: bool) -> None:
    assert same_server(Dsn.parse(a), Dsn.parse(b)) is same


def test_drop_schemas_keeps_closing_rows_and_other_schemas() -> None:
    batch = pa.RecordBatch.from_pydict({
        "schema_name": ["shop", "binlake", None, "binlake", "shop2"],
        "event_type": ["INSERT", "INSERT", "END", "QUERY", "DELETE"]})
    out = drop_schemas(batch, frozenset({"binlake"}))
    assert out.column(0).to_pylist() == ["shop", None, "shop2"]
    assert out.column(1).to_pylist() == ["INSERT", "END", "DELETE"]
    assert drop_schemas(batch, frozenset()) is batch
    assert drop_schemas(batch, frozenset({"nope"})) is batch
