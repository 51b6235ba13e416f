"""Issue 41 §3: a table's history follows it across names, and its columns across theirs.

A real MariaDB makes rows under ``rn.a``, renames it (``RENAME TABLE a TO b``), changes rows,
renames a column (``RENAME COLUMN``), changes rows, renames another (``CHANGE``) and the table
again (``ALTER TABLE … RENAME TO c``), then changes one row more. No schema snapshot: silver
names the rows by the binlog's own names. ``reconstruct`` of the name at each moment equals
the server's SELECT of that moment (rows made under the old names, with the old column
names, included), and ``query --table rn.c --pk K`` lists K's changes back to its INSERT
under ``rn.a``, ending in the server's row. The mirror of ``rn.c`` equals the server's
rows and names ``rn.x`` dropped, ``rn.a``/``rn.b`` renamed away; ``flashback --table rn.c``
of a DELETE made under ``rn.b``, run by the ``mariadb`` client, puts the row back into
``rn.c`` by today's column names.
"""

from __future__ import annotations

import json
import logging

import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.silver.renames import gone, renames_in
from devtools.mariadb import MariaDBServer
from tests.support.replay import server_tables, table_columns
from tests.history.test_flashback_cascade import _run
from tests.history.test_mariadb import _client
from tests.silver.test_derived import _position, _reconstructed

pytestmark = [pytest.mark.spark]

STEPS = [
    ("rn.a", ["DROP DATABASE IF EXISTS rn", "CREATE DATABASE rn",
              "CREATE TABLE rn.a (id INT PRIMARY KEY, v VARCHAR(10), w INT)",
              "INSERT INTO rn.a VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three', 30)",
              "UPDATE rn.a SET v = 'uno' WHERE id = 1",
              "CREATE TABLE rn.x (id INT PRIMARY KEY)", "INSERT INTO rn.x VALUES (1)"]),
    ("rn.b", ["RENAME TABLE rn.a TO rn.b",
              "DELETE FROM rn.b WHERE id = 2",
              "INSERT INTO rn.b VALUES (4, 'four', 40)", "DROP TABLE rn.x"]),
    ("rn.b", ["ALTER TABLE rn.b RENAME COLUMN v TO label",
              "UPDATE rn.b SET label = 'tres' WHERE id = 3"]),
    # no change after these two: the spec is the last change's, its names renamed
    ("rn.c", ["ALTER TABLE rn.b CHANGE w weight INT", "ALTER TABLE rn.b RENAME TO rn.c"]),
    ("rn.c", ["UPDATE rn.c SET weight = 41 WHERE id = 4"]),
]


def test_renames_parsed() -> None:
    assert renames_in("RENAME TABLE a TO b, s.c TO `s`.`d`", "db") == [
        (("db", "a"), ("db", "b"), ()), (("s", "c"), ("s", "d"), ())]
    assert renames_in("ALTER TABLE s.a RENAME TO b", "db") == [(("s", "a"), ("db", "b"), ())]
    assert renames_in("ALTER TABLE `a` RENAME COLUMN x TO y, CHANGE COLUMN z zz "
                      "DECIMAL(5,2) DEFAULT 1, ADD INDEX (q)", "db") == [
        (("db", "a"), ("db", "a"), (("x", "y"), ("z", "zz")))]
    assert renames_in("ALTER TABLE a CHANGE v v VARCHAR(10)", "db") == []
    assert renames_in("ALTER TABLE a RENAME INDEX i TO j", "db") == []
    assert renames_in("ALTER TABLE a ADD COLUMN b INT", "db") == []
    ddl = [("s", "f.000001", 4, "db", "CREATE TABLE t (a INT)"),
           ("s", "f.000001", 90, "db", "RENAME TABLE t TO u"),
           ("s", "f.000001", 150, "db", "CREATE TABLE t (a INT)"),
           ("s", "f.000001", 200, "db", "DROP TABLE IF EXISTS v"),
           ("s", "f.000001", 300, None, "DROP DATABASE w")]
    assert gone(ddl, [("db", "t"), ("db", "u"), ("db", "v"), ("w", "z")]) == {
        ("db", "v"): "dropped at f.000001:200", ("w", "z"): "dropped at f.000001:300"}
    assert gone(ddl[:2], [("db", "t")]) == {("db", "t"): "renamed to db.u at f.000001:90"}



def test_mirror_names_a_table_renamed_after_its_last_change() -> None:
    """A table renamed (twice) after its rows: the mirror runs its last name from the rename's
    position, so its first run reads the rows under the old names (seed 185301783 of the
    random workload: rw.t2 had no table though the server's held 7 rows)."""
    from pipelines.mirror.job import _renamed_into
    from pipelines.silver.renames import Rename

    facts = [Rename(100, ("db", "t"), ("db", "t1")), Rename(200, ("db", "t1"), ("db", "t2")),
             Rename(300, ("db", "x"), ("db", "y"))]
    batch = [{"schema_name": "db", "table_name": "t", "max_seq": 90, "n": 3, "min_seq": 10}]
    got = _renamed_into(batch, facts, {})
    assert got == batch + [{"schema_name": "db", "table_name": "t2", "max_seq": 200,
                            "n": None, "min_seq": 200}]
    # the new name has changes of its own, or a mirror already: nothing to add
    own = batch + [{"schema_name": "db", "table_name": "t2", "max_seq": 250, "n": 1,
                    "min_seq": 250}]
    assert _renamed_into(own, facts, {}) == own
    assert _renamed_into(batch, facts, {("db", "t2"): (210, 1, 1)}) == batch
    # a table mirrored in an earlier run, renamed since: its new name is added
    assert _renamed_into([], facts, {("db", "x"): (250, 0, 0)}) == [
        {"schema_name": "db", "table_name": "y", "max_seq": 300, "n": None, "min_seq": 300}]

@pytest.mark.mariadb
def test_reconstruct_and_query_follow_renames(spark, tmp_path, capsys, caplog) -> None:
    lake = str(tmp_path / "lake")
    cfg = load_config(env={}, overrides={"lake.root": lake})
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    moments = []
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        with server.connect() as conn:
            for name, statements in STEPS:
                _run(conn, *statements)
                moments.append((name, _position(conn), server_tables(conn, [name])[name],
                                table_columns(conn, *name.split("."))))
            cols_c = table_columns(conn, "rn", "c")
            server.copy_closed_binlogs(binlogs)
            assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0
            for name, cutoff, rows, cols in moments:
                assert _reconstructed(spark, cfg, cols, name, cutoff) == rows, (name, cutoff)
            # the CLI too: the columns are the server's names now
            capsys.readouterr()
            assert main(["--lake", lake, "reconstruct", "--table", "rn.c", "--at",
                         "2999-01-01 00:00:00", "--format", "jsonl"]) == 0
            lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
            assert [list(x) for x in lines[:1]] == [[c["name"] for c in moments[-1][3]]]
            # query of the new name: key 1's history from its INSERT under rn.a
            assert main(["--lake", lake, "query", "--table", "rn.c", "--pk", "1",
                         "--format", "jsonl"]) == 0
            changes = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
            assert [c["event_type"] for c in changes] == ["INSERT", "UPDATE"]
            from tests.support.replay import _row

            final = moments[-1][2]
            row_1 = [r for r in final if r[0] == 1]
            last = changes[-1]["row_after"]
            renamed = {"label" if k == "v" else "weight" if k == "w" else k: v for k, v in last.items()}
            assert [_row(cols_c, renamed)] == row_1
            assert main(["--lake", lake, "query", "--table", "rn.c", "--pk", "4",
                         "--format", "jsonl"]) == 0
            changes = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
            assert [c["event_type"] for c in changes] == ["INSERT", "UPDATE"]
            assert _row(cols_c, changes[-1]["row_after"]) in final
            # the mirror of the new name holds the rows made under the old names, by today's columns
            from pipelines.mirror.job import mirror_path, run_mirror

            res = run_mirror(spark, cfg)
            # the mirrors of the names gone say so: dropped, renamed away (and where)
            assert sorted(res.gone) == [("rn", "a"), ("rn", "b"), ("rn", "x")]
            assert res.gone[("rn", "x")].startswith("dropped at mariadb-bin.")
            assert res.gone[("rn", "a")].startswith("renamed to rn.b at ")
            assert res.gone[("rn", "b")].startswith("renamed to rn.c at ")
            mirrored = spark.read.format("delta").load(mirror_path(cfg, "current", "rn", "c"))
            names = [c["name"] for c in cols_c]
            assert [c for c in mirrored.columns if not c.startswith("__")] == names
            assert sorted(tuple(None if r[n] is None else str(r[n]) for n in names)
                          for r in mirrored.collect()) == sorted(
                tuple(None if v is None else str(v) for v in r) for r in final)

            # flashback of the DELETE made under rn.b (before both column renames): the row
            # goes back into rn.c, by today's column names, run by the mariadb client
            capsys.readouterr()
            assert main(["--lake", lake, "flashback", "--table", "rn.c", "--event-type",
                         "DELETE", "--format", "sql"]) == 0
            script = capsys.readouterr().out
            assert "`rn`.`c`" in script and "`label`" in script
            _client(server, script)
            was = [r for r in moments[0][2] if r[0] == 2]
            assert len(was) == 1
            assert server_tables(conn, ["rn.c"])["rn.c"] == sorted(final + was, key=repr)

            # a column renamed after the mirror was built: its rows of before keep the old
            # column there until a rebuild, and the next run says so
            _run(conn, "ALTER TABLE rn.c RENAME COLUMN label TO tag",
                 "UPDATE rn.c SET weight = weight + 1 WHERE id = 1")
            server.copy_closed_binlogs(binlogs)
            assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) == 0
            with caplog.at_level(logging.WARNING, logger="pipelines.mirror.job"):
                run_mirror(spark, cfg)
            said = [r.getMessage() for r in caplog.records if "renamed after" in r.getMessage()]
            assert said == ["mirror: rn.c: column(s) label -> tag renamed after its mirror was "
                            "built: rows not changed since keep the old column; rebuild the "
                            "mirror to fold them under the new name (docs/mirror.md)"]
