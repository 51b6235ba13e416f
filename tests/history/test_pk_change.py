"""Issue 41 §5: an UPDATE changing the primary key is found under both keys.

A real MariaDB changes the key of a row of a one-column key table, one column of a two-column
key, and a row of a table without PRIMARY KEY (its key: every column). After ``binlake
index``, ``query --pk NEW`` lists the UPDATE that made NEW and the key's later changes, and
its last after image is the server's row; ``query --pk OLD`` still lists the UPDATE (as
bintrail: pk_values is the before image's key). Silver's ``pk_values_after`` is set exactly
on the key-changing UPDATEs, ``pk_hash_after`` is its sha2.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables, table_columns
from tests.history.test_flashback_cascade import _run

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

TABLES = ["pkc.one", "pkc.two", "pkc.nopk"]
STATEMENTS = [
    "DROP DATABASE IF EXISTS pkc", "CREATE DATABASE pkc",
    "CREATE TABLE pkc.one (id INT PRIMARY KEY, v VARCHAR(20))",
    "CREATE TABLE pkc.two (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
    "CREATE TABLE pkc.nopk (x INT, y VARCHAR(10))",
    "INSERT INTO pkc.one VALUES (5, 'five'), (6, 'six')",
    "INSERT INTO pkc.two VALUES (1, 'p|q', 10), (2, 'r', 20)",
    "INSERT INTO pkc.nopk VALUES (1, 'a'), (2, 'b')",
    "UPDATE pkc.one SET v = 'still 5' WHERE id = 5",      # no key change
    "UPDATE pkc.one SET id = 105 WHERE id = 5",           # 5 → 105
    "UPDATE pkc.one SET v = 'now 105' WHERE id = 105",
    "UPDATE pkc.two SET b = 's\\\\t' WHERE a = 1",          # (1, p|q) → (1, s\t)
    "UPDATE pkc.two SET v = 21 WHERE a = 2",
    "UPDATE pkc.nopk SET y = 'c' WHERE x = 2",            # (2, b) → (2, c)
]


def _query(lake: str, table: str, pk: str, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["--lake", lake, "query", "--table", table, "--pk", pk,
                 "--format", "jsonl"]) == 0
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


def test_query_finds_a_key_changing_update_under_both_keys(spark, tmp_path, capsys) -> None:
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            _run(conn, *STATEMENTS)
            truth = server_tables(conn, TABLES)
            cols = {t: table_columns(conn, *t.split(".")) for t in TABLES}
            server.copy_closed_binlogs(binlogs)
    assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0

    silver = [r.asDict() for r in spark.read.format("delta")
              .load(cfg.table_path("silver", "binlog_events")).collect()]
    moved = sorted((r["table_name"], r["pk_values"], r["pk_values_after"]) for r in silver
                   if r["pk_values_after"] is not None)
    assert moved == [("nopk", "2|b", "2|c"), ("one", "5", "105"), ("two", "1|p\\|q", "1|s\\\\t")]
    for r in silver:
        want = None if r["pk_values_after"] is None else hashlib.sha256(
            r["pk_values_after"].encode()).hexdigest()
        assert r["pk_hash_after"] == want

    from tests.support.replay import _row

    cases = [("pkc.one", "5", "105", ["INSERT", "UPDATE", "UPDATE"], ["UPDATE", "UPDATE"]),
             ("pkc.two", "1|p\\|q", "1|s\\\\t", ["INSERT", "UPDATE"], ["UPDATE"]),
             ("pkc.nopk", "2|b", "2|c", ["INSERT", "UPDATE"], ["UPDATE"])]
    for table, old, new, old_types, new_types in cases:
        before = _query(lake, table, old, capsys)
        assert [c["event_type"] for c in before] == old_types, table
        after = _query(lake, table, new, capsys)
        assert [c["event_type"] for c in after] == new_types, table
        # the new key's history begins with the UPDATE that made it, ends in the server's row
        assert after[0]["seq"] == before[-1]["seq"], table
        assert after[0]["pk_values"] == old
        assert _row(cols[table], after[-1]["row_after"]) in truth[table], table
    # every key's history ends in the server's row: the server's rows are exactly those
    for table in TABLES:
        ends = []
        for row in truth[table]:
            key = [c for c in cols[table] if c["pk"]] or cols[table]
            pk = "|".join(str(row[cols[table].index(c)]).replace("\\", "\\\\")
                          .replace("|", "\\|") for c in key)
            ends.append(_row(cols[table], _query(lake, table, pk, capsys)[-1]["row_after"]))
        assert sorted(ends, key=repr) == sorted(truth[table], key=repr), table
