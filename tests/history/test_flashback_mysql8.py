"""Flashback SQL from MySQL 8 binlogs of the corpus: JSON, PARTIAL_JSON, compressed
transactions (TRANSACTION_PAYLOAD), ENUM/SET, BIT — where `mariadb-binlog --flashback` cannot
go. There is no MySQL 8 server here, so the assertions are on the SQL text and its literals;
tables with MINIMAL row metadata are named by imported snapshots, as a user would.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.history.flashback import plan_flashback, render_script
from pipelines.history.selection import Selection
from pipelines.silver.job import run_silver
from pipelines.source.model import ColumnSchema, Snapshot, TableSchema
from pipelines.silver.snapshot_store import save_snapshot

pytestmark = [pytest.mark.spark]

BB = "blackbeam__rust_mysql_common/test-data__binlogs__"
# (corpus file, name in the lake, source)
FILES = [
    (BB + "json.binlog.000001", "json.000001", "partial"),
    (BB + "json-opaque.binlog", "opaque.000002", "full"),
    (BB + "mysql-enum-string-set.000001", "enumset.000003", "full"),
    (BB + "mysql_type_bit.000001", "bit.000004", "full"),
    (BB + "transaction_compression.000001", "tc.000005", "compressed"),
    ("osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.compressed",
     "movies.000006", "compressed"),
]


def _col(name, ordinal, data_type, column_type=None, *, pk=None, generated=False):
    text = data_type in ("varchar", "char", "text")
    return ColumnSchema(name, ordinal, data_type, column_type or data_type,
                        charset="utf8mb4" if text else None,
                        collation="utf8mb4_0900_ai_ci" if text else None,
                        generated=generated, is_json=data_type == "json", pk_ordinal=pk)


def _snapshot(sid, source, binlog_file, pos, tables) -> Snapshot:
    return Snapshot(sid, dt.datetime(2024, 1, 1), source, 1, None, "8.0.32", binlog_file, pos,
                    None, {(t.schema, t.table): t for t in tables}, [])


def build_mysql8_lake(spark, corpus: Path, tmp: Path, env: dict | None = None):
    """Bronze + silver of the MySQL 8 files (three sources), MINIMAL tables named by
    snapshots; returns the config. ``env``: extra settings (a catalog, for the JVM test)."""
    lake = str(tmp / "lake")
    for source in ("partial", "full", "compressed"):
        binlogs = tmp / source
        binlogs.mkdir()
        for path, name, src in FILES:
            if src == source:
                shutil.copy(Path(corpus) / path, binlogs / name)
        cfg = load_config(env=dict(env or {}), overrides={"lake.root": lake,
                                                          "source.name": source})
        assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
    cfg = load_config(env=dict(env or {}), overrides={"lake.root": lake})
    movies = ["id", "title", "year", "country", "genres", "actors", "director", "composer",
              "screenwriters", "cinematographer", "production_company"]
    save_snapshot(spark, cfg, _snapshot("s-partial", "partial", "json.000001", 3606, [
        TableSchema("mysql", "t", [
            _col("id", 1, "int", pk=1), _col("json_col", 2, "json"),
            _col("name", 3, "varchar", "varchar(100)", generated=True),
            _col("age", 4, "int", generated=True)])]))
    save_snapshot(spark, cfg, _snapshot("s-compressed", "compressed", "movies.000006", 4, [
        TableSchema("test", "tb1", [_col("id", 1, "int", pk=1)]),
        TableSchema("demo", "movies", [
            _col(n, i + 1, "int" if n in ("id", "year") else "varchar", pk=1 if i == 0 else None)
            for i, n in enumerate(movies)])]))
    res = run_silver(spark, cfg)
    assert res.quarantined == 0
    return cfg


@pytest.fixture(scope="module")
def mysql8_lake(spark, corpus, tmp_path_factory):
    return build_mysql8_lake(spark, corpus, tmp_path_factory.mktemp("mysql8"))


def check_script(plan, lines: list[str]) -> None:
    """The assertions on a MySQL 8 flashback script (shared with the JVM test)."""
    assert lines[1:4] == ["SET NAMES utf8mb4;", "SET SESSION time_zone = '+00:00';",
                          "SET SESSION sql_mode = '';"]
    # Compressed transaction (TRANSACTION_PAYLOAD, zstd): the UPDATE goes back.
    movie = [x for x in lines if x.startswith("UPDATE `demo`.`movies`")]
    assert len(movie) == 1
    assert "SET `id` = 1, `title` = 'Once Upon a Time in the West', `year` = 1968" in movie[0]
    assert "`genres` = 'Western'" in movie[0] and "`genres` <=> 'Western|Action'" in movie[0]
    assert "DELETE FROM `test`.`tb1` WHERE `id` <=> 1 LIMIT 1;" in lines
    # MySQL JSON: compared and written through CAST(... AS JSON); generated columns are
    # matched but never assigned.
    json_t = [x for x in lines if "`mysql`.`t`" in x and "CAST(" in x]
    assert json_t and all("AS JSON)" in x for x in json_t)
    assert not any("`name` = " in x or "`age` = " in x for x in lines if "`mysql`.`t`" in x)
    assert any(x.startswith("DELETE FROM `foo`.`test` WHERE") for x in lines)  # MySQL 9 JSON
    # PARTIAL_JSON after a MINIMAL before image: the lost columns are named in a warning.
    assert any("lacks json_col" in w for w in plan.warnings)
    partial = [x for x in lines if x.startswith("UPDATE `mysql`.`t` SET `id` = 1 WHERE")]
    assert partial == ["UPDATE `mysql`.`t` SET `id` = 1 WHERE `id` <=> 1 AND `name` <=> 'Joe' "
                       "AND `age` <=> 26 LIMIT 1;"]  # the key is matched, not only name/age
    # Newest first: the transactions' sequence numbers decrease.
    assert [t.last_seq for t in plan.transactions] == sorted(
        (t.last_seq for t in plan.transactions), reverse=True)


def test_flashback_sql_from_mysql8_binlogs(spark, mysql8_lake) -> None:
    plan = plan_flashback(spark, mysql8_lake, Selection())
    silver = spark.read.format("delta").load(mysql8_lake.table_path("silver", "binlog_events"))
    assert plan.changes == silver.count() > 30
    check_script(plan, render_script(plan).splitlines())
