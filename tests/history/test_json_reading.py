"""Issue 41 §4: one reading of a MariaDB JSON column, whichever order index and snapshot ran.

MariaDB's JSON is a LONGTEXT with a ``json_valid`` CHECK that only a schema snapshot names:
``binlake index`` before any snapshot renders its values as JSON strings of the document
(``schema_version`` 'binlog'). The snapshot, taken after, names the column JSON. Then
``flashback --format sql`` run by the ``mariadb`` client restores the rows from before a
window with ``JSON_TYPE`` unchanged (no document turned into a string), ``reconstruct
--format sql`` run into an empty copy gives the server's rows, and the mirror's current
table holds the server's documents.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.mirror.job import mirror_path
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables
from tests.history.test_flashback_cascade import _create_and_snapshot, _gtid, _run
from tests.history.test_mariadb import _client, _gtids_between

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

DDL = ["DROP DATABASE IF EXISTS js", "CREATE DATABASE js",
       "CREATE TABLE js.p (id INT PRIMARY KEY, profile JSON, note VARCHAR(10))"]
SETUP = [
    """INSERT INTO js.p VALUES (1, '{"city":"Paris"}', 'a'), (2, '[1, 2.50, "x"]', 'b'),
       (3, '"just a string"', 'c'), (4, '{"a": {"b": null}, "n": 1.10}', 'd'),
       (5, NULL, 'e')""",
]
WINDOW = [
    """UPDATE js.p SET profile = '{"city":"Lyon","zip":"69001"}' WHERE id = 1""",
    "DELETE FROM js.p WHERE id = 2",
    "UPDATE js.p SET note = 'cc' WHERE id = 3",
    """INSERT INTO js.p VALUES (9, '{"new": true}', 'n')""",
    "DELETE FROM js.p WHERE id = 4",
]


def _types(conn, table: str) -> dict[int, str | None]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, JSON_TYPE(profile) FROM {table}")
        return dict(cur.fetchall())


def _documents(conn, table: str) -> dict[int, object]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, profile FROM {table}")
        return {i: None if p is None else json.loads(p, parse_float=Decimal)
                for i, p in cur.fetchall()}


def test_json_read_once_when_the_snapshot_comes_after_index(spark, tmp_path, capsys) -> None:
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            _run(conn, *DDL, *SETUP)
            g0 = _gtid(conn)
            before, types_before = server_tables(conn, ["js.p"]), _types(conn, "js.p")
            docs_before = _documents(conn, "js.p")
            _run(conn, *WINDOW)
            g1 = _gtid(conn)
            after, types_after = server_tables(conn, ["js.p"]), _types(conn, "js.p")
            docs_after = _documents(conn, "js.p")
            server.copy_closed_binlogs(binlogs)
            assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0
            silver = spark.read.format("delta").load(cfg.table_path("silver", "binlog_events"))
            assert {r[0] for r in silver.select("schema_version").distinct().collect()} \
                == {"binlog"}
            # the snapshot, after index, names profile JSON (LONGTEXT + json_valid CHECK)
            _create_and_snapshot(spark, cfg, conn, server.dsn(), [], "js")

            # reconstruct --format sql, run into an empty copy: the server's rows and types
            capsys.readouterr()
            assert main(["--lake", lake, "reconstruct", "--table", "js.p", "--gtid", g1,
                         "--format", "sql"]) == 0
            script = capsys.readouterr().out
            assert '\\"city\\"' not in script  # no document written as a JSON string
            _run(conn, "DROP DATABASE IF EXISTS cp", "CREATE DATABASE cp",
                 "CREATE TABLE cp.p LIKE js.p")
            _client(server, script.replace("`js`.`p`", "`cp`.`p`"))
            assert server_tables(conn, ["cp.p"])["cp.p"] == after["js.p"]
            assert _types(conn, "cp.p") == types_after

            # query prints the document, not a string of it
            capsys.readouterr()
            assert main(["--lake", lake, "query", "--table", "js.p", "--pk", "1",
                         "--format", "jsonl"]) == 0
            history = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
            assert [c["row_after"]["profile"] for c in history] == [
                {"city": "Paris"}, {"city": "Lyon", "zip": "69001"}]
            assert history[1]["row_before"]["profile"] == {"city": "Paris"}

            # the mirror holds the documents
            assert main(["--lake", lake, "mirror"]) == 0
            rows = spark.read.format("delta").load(mirror_path(cfg, "current", "js", "p"))
            mirrored = {r["id"]: None if r["profile"] is None
                        else json.loads(r["profile"], parse_float=Decimal)
                        for r in rows.collect()}
            assert mirrored == docs_after

            # flashback of the window, run by the mariadb client: the rows and their types
            capsys.readouterr()
            assert main(["--lake", lake, "flashback", "--gtid", _gtids_between(g0, g1),
                         "--format", "sql"]) == 0
            undo = capsys.readouterr().out
            _client(server, undo)
            assert server_tables(conn, ["js.p"]) == before
            assert _types(conn, "js.p") == types_before
            assert types_before[1] == "OBJECT" and types_before[3] == "STRING"
            assert _documents(conn, "js.p") == docs_before
