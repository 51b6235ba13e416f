"""Issue 41's acceptance: a randomized workload of the statements whose row effects the
binlog does not spell out, on a real MariaDB; truth is the server's own SELECT.

A generator (its seed printed; ``BINLAKE_FUZZ_SEED=<seed>`` replays one) builds an FK chain
two deep whose ON DELETE / ON UPDATE actions are drawn from every action InnoDB supports
(CASCADE, SET NULL, RESTRICT, NO ACTION; InnoDB has no SET DEFAULT), a JSON column, and a
side table that is TRUNCATEd then re-filled, gets ADD COLUMN with defaults on existing rows
and is renamed (RENAME TABLE). Statements are multi-row INSERTs, UPDATEs (PK-changing ones
included) and DELETEs at random; a statement a RESTRICT / NO ACTION rule refuses is not
logged and changes nothing. At several moments the test records the server's SELECT of every
table and its binlog position.

The same binlogs are indexed into two lakes: ``early`` (schema snapshot taken at creation,
before the workload) and ``late`` (snapshot taken only after indexing, then silver re-run).
For each: ``reconstruct`` at every recorded moment equals the SELECT of that moment, and
``binlake mirror``'s current tables equal the final SELECT, and ``binlake query --pk`` of
a few keys of the FK chain alive at the end ends in the server's row. Last, ``binlake flashback`` of
every transaction after a random moment, its script run by the ``mariadb`` client, brings
the server's FK chain back to that moment's SELECT (the side table too when no DDL of it
lies in the window: flashback does not undo DDL).

The side table's added columns are also renamed (RENAME COLUMN), widened (MODIFY) and
dropped (DROP COLUMN) at random. A partitioned table (RANGE, RANGE COLUMNS, LIST or HASH, of
the key or of a date) gets its partitions dropped, truncated, split (REORGANIZE), added and
coalesced between its row changes, key changes that move rows across partitions included.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pymysql
import pytest

from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.history.reconstruct import Point, reconstruct
from pipelines.silver.job import run_silver
from pipelines.source.schema import take_snapshot
from pipelines.silver.snapshot_store import save_snapshot
from devtools.mariadb import MariaDBServer
from pipelines.mirror.job import mirror_path
from tests.support.replay import server_tables, table_columns
from tests.history.test_mariadb import _client, _gtids_between
from tests.silver.test_derived import _position, _reconstructed

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

_SEED = int(os.environ.get("BINLAKE_FUZZ_SEED") or random.SystemRandom().randrange(2**31))
ACTIONS = ["CASCADE", "SET NULL", "RESTRICT", "NO ACTION"]


def _ddl(rng: random.Random) -> list[str]:
    def rule() -> str:
        return f"ON DELETE {rng.choice(ACTIONS)} ON UPDATE {rng.choice(ACTIONS)}"
    return [
        "DROP DATABASE IF EXISTS rw", "CREATE DATABASE rw",
        "CREATE TABLE rw.a (id INT PRIMARY KEY, name VARCHAR(20), doc JSON) ENGINE=InnoDB",
        "CREATE TABLE rw.b (id INT PRIMARY KEY, a_id INT NULL, v INT, "
        f" FOREIGN KEY (a_id) REFERENCES rw.a (id) {rule()}) ENGINE=InnoDB",
        "CREATE TABLE rw.c (id INT PRIMARY KEY, b_id INT NULL, note VARCHAR(10), "
        f" FOREIGN KEY (b_id) REFERENCES rw.b (id) {rule()}) ENGINE=InnoDB",
        "CREATE TABLE rw.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
    ]


class Workload:
    """Random statements against rw.*; ``t`` is the side table's current name."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.t = "t"
        self.added = 0
        self.renames = 0
        self.ddl = 0  # DDL statements on the side table so far (ALTER, RENAME)
        self.extra: list[tuple[str, str]] = []  # the side table's added columns: (name, kind)
        self.column_ddl = 0

    def tables(self) -> list[str]:
        return ["rw.a", "rw.b", "rw.c", f"rw.{self.t}", "rw.p"]

    def _ids(self, n: int, lo: int, hi: int) -> list[int]:
        return self.rng.sample(range(lo, hi), n)

    def statement(self) -> str:
        rng = self.rng
        kind = rng.choices(
            ["ins_a", "ins_b", "ins_c", "upd_a_pk", "upd_b_pk", "upd_a_doc", "upd_c",
             "del_a", "del_b", "ins_t", "upd_t", "truncate", "add_col", "rename", "column"],
            [4, 4, 4, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1])[0]
        if kind == "ins_a":
            vals = ", ".join(
                f"({i}, 'n{i}', '{{\"k\": {rng.randrange(100)}, \"s\": \"x{i}\"}}')"
                for i in self._ids(rng.randint(1, 3), 1, 40))
            return f"INSERT IGNORE INTO rw.a VALUES {vals}"
        if kind == "ins_b":
            vals = ", ".join(f"({i}, (SELECT MIN(id) FROM rw.a WHERE id >= {rng.randrange(40)}),"
                             f" {rng.randrange(1000)})" for i in self._ids(rng.randint(1, 3), 1, 60))
            return f"INSERT IGNORE INTO rw.b VALUES {vals}"
        if kind == "ins_c":
            vals = ", ".join(f"({i}, (SELECT MIN(id) FROM rw.b WHERE id >= {rng.randrange(60)}),"
                             f" 'c{i}')" for i in self._ids(rng.randint(1, 3), 1, 80))
            return f"INSERT IGNORE INTO rw.c VALUES {vals}"
        if kind == "upd_a_pk":
            return f"UPDATE IGNORE rw.a SET id = id + 40 WHERE id = {rng.randrange(1, 40)}"
        if kind == "upd_b_pk":
            return f"UPDATE IGNORE rw.b SET id = id + 60 WHERE id = {rng.randrange(1, 60)}"
        if kind == "upd_a_doc":
            return (f"UPDATE rw.a SET doc = JSON_SET(doc, '$.k', {rng.randrange(100)}) "
                    f"WHERE id % 3 = {rng.randrange(3)}")
        if kind == "upd_c":
            return f"UPDATE rw.c SET note = 'u{rng.randrange(9)}' WHERE id < {rng.randrange(80)}"
        if kind == "del_a":
            return f"DELETE FROM rw.a WHERE id BETWEEN {(lo := rng.randrange(80))} AND {lo + 3}"
        if kind == "del_b":
            return f"DELETE FROM rw.b WHERE id BETWEEN {(lo := rng.randrange(120))} AND {lo + 3}"
        t = f"rw.{self.t}"
        if kind == "ins_t":
            vals = ", ".join(f"({i}, {rng.randrange(100)})" for i in self._ids(rng.randint(1, 4), 1, 30))
            return f"INSERT IGNORE INTO {t} (id, v) VALUES {vals}"
        if kind == "upd_t":
            return f"UPDATE IGNORE {t} SET id = id + 30, v = v + 1 WHERE id = {rng.randrange(1, 30)}"
        if kind == "truncate":
            return f"TRUNCATE TABLE {t}"
        # an ADD COLUMN before the side table's first INSERT leaves an epoch no snapshot
        # and no change names: reconstruct gives the empty table (seed 1482055830)
        if kind == "add_col" and self.added < 2:
            self.added += 1
            self.ddl += 1
            default = rng.choice(["INT NOT NULL DEFAULT 7", "VARCHAR(10) DEFAULT 'w''eb'",
                                  "DECIMAL(6,2) NOT NULL DEFAULT 1.555",
                                  "DATE NOT NULL DEFAULT '2024-02-29'"])
            self.extra.append((f"x{self.added}", default.split()[0]))
            return f"ALTER TABLE {t} ADD COLUMN x{self.added} {default}"
        if kind == "column" and self.extra and self.column_ddl < 2:
            # an added column renamed, retyped or dropped (the statements never name it)
            self.column_ddl += 1
            self.ddl += 1
            i = rng.randrange(len(self.extra))
            name, typ = self.extra[i]
            how = rng.choice(["rename", "modify", "drop"])
            if how == "rename":
                self.extra[i] = (f"{name}r", typ)
                return f"ALTER TABLE {t} RENAME COLUMN {name} TO {name}r"
            if how == "modify":
                wider = {"INT": "BIGINT NOT NULL DEFAULT 7",
                         "DECIMAL(6,2)": "DECIMAL(8,2) NOT NULL DEFAULT 1.555",
                         "DATE": "DATE NULL DEFAULT '2024-02-29'"}.get(
                    typ, "VARCHAR(20) DEFAULT 'w''eb'")
                return f"ALTER TABLE {t} MODIFY {name} {wider}"
            del self.extra[i]
            return f"ALTER TABLE {t} DROP COLUMN {name}"
        if kind == "rename" and self.renames < 2:
            self.renames += 1
            self.ddl += 1
            new = f"t{self.renames}"
            old, self.t = self.t, new
            return f"RENAME TABLE rw.{old} TO rw.{new}"
        return f"UPDATE {t} SET v = v + 1 WHERE id % 2 = {rng.randrange(2)}"


class Partitioned:
    """A partitioned table ``rw.p`` (id, d DATE, v; key (id, d)) and random statements on it,
    partition drops, truncates and re-shapes among them. Drawn from its own generator (the
    seed's ``p`` stream), so the other tables' statements stay those of earlier versions."""

    METHODS = ["RANGE (id)", "RANGE (YEAR(d))", "RANGE COLUMNS (d)", "RANGE (TO_DAYS(d))",
               "LIST (id)", "HASH (id)"]

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.method = rng.choice(self.METHODS)
        self.ddl = 0  # partition DDL so far (flashback does not undo it)
        self.made = 0
        if self.method == "LIST (id)":
            self.parts = [(f"l{i}", list(range(10 * i + 1, 10 * i + 11))) for i in range(4)]
        elif self.method == "HASH (id)":
            self.count = 3
        else:
            bounds = [10, 20, 30] if self.method == "RANGE (id)" else [2001, 2002, 2003]
            self.parts = [(f"r{i}", b) for i, b in enumerate(bounds)] + [("rmax", None)]

    def _bound(self, b) -> str:
        if b is None:
            return "MAXVALUE"
        if self.method == "RANGE COLUMNS (d)":
            return f"('{b}-01-01')"
        if self.method == "RANGE (TO_DAYS(d))":
            return f"(TO_DAYS('{b}-01-01'))"
        return f"({b})"

    def _definitions(self, parts) -> str:
        if self.method == "LIST (id)":
            return ", ".join(f"PARTITION {n} VALUES IN ({', '.join(map(str, v))})"
                             for n, v in parts)
        return ", ".join(f"PARTITION {n} VALUES LESS THAN {self._bound(b)}" for n, b in parts)

    def create(self) -> str:
        head = ("CREATE TABLE rw.p (id INT NOT NULL, d DATE NOT NULL, v INT, "
                f"PRIMARY KEY (id, d)) ENGINE=InnoDB PARTITION BY {self.method}")
        if self.method == "HASH (id)":
            return f"{head} PARTITIONS {self.count}"
        return f"{head} ({self._definitions(self.parts)})"

    def statements(self) -> list[str]:
        """None, or one statement (two: a LIST partition dropped and given back)."""
        rng = self.rng
        if rng.random() < 0.6:
            return []
        kind = rng.choices(["ins", "upd", "move", "del", "truncate", "drop", "shape"],
                           [5, 2, 2, 2, 1, 1, 1])[0]
        day = lambda: f"DATE_ADD('2000-01-01', INTERVAL {rng.randrange(4 * 365)} DAY)"
        if kind == "ins":
            vals = ", ".join(f"({rng.randint(1, 40)}, {day()}, {rng.randrange(100)})"
                             for _ in range(rng.randint(1, 5)))
            return [f"INSERT IGNORE INTO rw.p VALUES {vals}"]
        if kind == "upd":
            return [f"UPDATE rw.p SET v = v + 1 WHERE id % 3 = {rng.randrange(3)}"]
        if kind == "move":  # a key change: the row moves to another partition
            return [f"UPDATE IGNORE rw.p SET d = DATE_ADD(d, INTERVAL 400 DAY), id = "
                    f"LEAST(id + 9, 40) WHERE id = {rng.randint(1, 40)}"]
        if kind == "del":
            return [f"DELETE FROM rw.p WHERE id BETWEEN {(lo := rng.randint(1, 40))} AND {lo + 2}"]
        self.ddl += 1
        if self.method == "HASH (id)":
            if kind == "shape":
                if self.count < 5 and rng.random() < 0.5 or self.count <= 2:
                    self.count += 1
                    return ["ALTER TABLE rw.p ADD PARTITION PARTITIONS 1"]
                self.count -= 1
                return ["ALTER TABLE rw.p COALESCE PARTITION 1"]
            return [f"ALTER TABLE rw.p TRUNCATE PARTITION p{rng.randrange(self.count)}"]
        names = [n for n, _ in self.parts]
        if kind == "truncate" or len(self.parts) < 3:
            return [f"ALTER TABLE rw.p TRUNCATE PARTITION "
                    f"{', '.join(rng.sample(names, rng.randint(1, 2)))}"]
        self.made += 1
        if self.method == "LIST (id)":
            i = rng.randrange(len(self.parts))
            name, values = self.parts.pop(i)
            again = (f"{name}x{self.made}", values)
            self.parts.append(again)
            return [f"ALTER TABLE rw.p DROP PARTITION {name}",
                    f"ALTER TABLE rw.p ADD PARTITION ({self._definitions([again])})"]
        if kind == "drop":  # never the MAXVALUE one: every row keeps a partition
            name = rng.choice(names[:-1])
            self.parts = [x for x in self.parts if x[0] != name]
            return [f"ALTER TABLE rw.p DROP PARTITION {name}"]
        # REORGANIZE: a partition split in two (at a bound between its neighbours)
        i = rng.randrange(len(self.parts))
        lo = self.parts[i - 1][1] if i else (0 if self.method == "RANGE (id)" else 2000)
        hi = self.parts[i][1]
        mid = lo + 1 if hi is None else (lo + hi) // 2
        if mid <= lo or hi is not None and mid >= hi:
            return [f"ALTER TABLE rw.p TRUNCATE PARTITION {self.parts[i][0]}"]
        old, new = self.parts[i][0], [(f"s{self.made}", mid), (f"t{self.made}", hi)]
        self.parts[i:i + 1] = new
        return [f"ALTER TABLE rw.p REORGANIZE PARTITION {old} INTO ({self._definitions(new)})"]


def _execute(conn, sql: str) -> None:
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
        except pymysql.err.IntegrityError as exc:  # RESTRICT / NO ACTION refused it
            assert exc.args[0] == 1451, (sql, exc)


def _moment(conn, w: Workload) -> dict:
    tables = w.tables()
    with conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        gtid = cur.fetchone()[0]
    return {"seq": _position(conn), "rows": server_tables(conn, tables),
            "cols": {t: table_columns(conn, *t.split(".")) for t in tables}, "gtid": gtid,
            "side_ddl": w.ddl, "part_ddl": w.parts.ddl}


def _index(lake: str, binlogs) -> None:
    assert main(["--lake", lake, "index", "--binlog-dir", str(binlogs), "--all"]) in (0, 1)


def _check(spark, cfg, moments: list[dict], conn, final_tables: list[str], label: str) -> None:
    for n, m in enumerate(moments):
        for table, rows in m["rows"].items():
            warnings = reconstruct(spark, cfg, *table.split("."),
                                   Point(m["seq"], "moment")).warnings
            assert not any("rules are unknown" in w for w in warnings), (label, table)
            got = _reconstructed(spark, cfg, m["cols"][table], table, m["seq"])
            assert got == rows, (label, f"moment {n}", table)
    _key_histories(cfg, moments[-1], label)
    assert main(["--lake", cfg.lake.root, "mirror"]) == 0
    final = moments[-1]
    for table in final_tables:
        cols = final["cols"][table]
        path = mirror_path(cfg, "current", *table.split("."))
        want = [tuple(_plain(c, v) for c, v in zip(cols, row)) for row in final["rows"][table]]
        if not list((Path(path) / "_delta_log").glob("*.json")):
            # KNOWN GAP (reported): the mirror writes no table for a name that never held
            # a row (seed 1259152627); only an empty server table may lack one
            assert want == [], (label, "mirror has no table", table)
            continue
        got = [tuple(_plain(c, r[c["name"]]) for c in cols)
               for r in spark.read.format("delta").load(path).collect()]
        assert sorted(got, key=repr) == sorted(want, key=repr), (label, "mirror", table)


def _key_histories(cfg, final: dict, label: str) -> None:
    """``binlake query --table T --pk K`` of a few keys of each FK-chain table alive at the
    end (key changes and FK actions included): the history's last image is the server's
    row."""
    import contextlib
    import io

    from tests.support.replay import _row

    for table in ("rw.a", "rw.b", "rw.c"):
        cols = final["cols"][table]
        for row in random.Random(f"{_SEED}{table}").sample(final["rows"][table],
                                                           min(3, len(final["rows"][table]))):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert main(["--lake", cfg.lake.root, "query", "--table", table, "--pk",
                             str(row[0]), "--format", "jsonl"]) == 0
            changes = [json.loads(x) for x in out.getvalue().splitlines() if x.strip()]
            assert changes and changes[-1]["event_type"] in ("INSERT", "UPDATE"), (
                label, table, row[0], changes[-1:])
            assert _row(cols, changes[-1]["row_after"]) == row, (label, table, row[0])
    # every key: the table's whole history as `query` gives it, folded by key in its order
    # (binlog order), ends in the server's rows, no key more or less
    for table, key in (("rw.a", ["id"]), ("rw.b", ["id"]), ("rw.c", ["id"]),
                       ("rw.p", ["id", "d"])):
        cols = final["cols"][table]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["--lake", cfg.lake.root, "query", "--table", table,
                         "--format", "jsonl"]) == 0
        alive: dict[tuple, tuple] = {}
        for change in (json.loads(x) for x in out.getvalue().splitlines() if x.strip()):
            if change["row_before"] is not None:
                alive.pop(tuple(change["row_before"][k] for k in key), None)
            if change["row_after"] is not None:
                alive[tuple(change["row_after"][k] for k in key)] = _row(cols, change["row_after"])
        assert sorted(alive.values(), key=repr) == sorted(final["rows"][table], key=repr), (
            label, "query", table)


def _flashback_since(server, cfg, moment: dict, last: dict, w: Workload) -> None:
    """``binlake flashback`` of every transaction after ``moment``, its script run by the
    ``mariadb`` client: the FK chain's tables equal their SELECT of that moment, and so does
    the side table when no DDL of it lies in the window (flashback does not undo DDL)."""
    import contextlib
    import io

    window = _gtids_between(moment["gtid"], last["gtid"])
    if not window:
        return
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--lake", cfg.lake.root, "flashback", "--schema", "rw", "--gtid", window,
                     "--format", "sql"]) == 0
    _client(server, out.getvalue())
    tables = ["rw.a", "rw.b", "rw.c"] + (
        [f"rw.{w.t}"] if last["side_ddl"] == moment["side_ddl"] else []) + (
        ["rw.p"] if last["part_ddl"] == moment["part_ddl"] else [])
    with server.connect() as conn:
        got = server_tables(conn, tables)
    for table in tables:
        assert got[table] == moment["rows"][table], ("flashback", table, moment["gtid"])


def _plain(col: dict, value):
    """One value of the mirror or the server's SELECT, comparable: JSON parsed, the rest as
    text (a column added after the snapshot is typed as its JSON text: docs/mirror.md)."""
    if value is None:
        return None
    if col["json"]:
        return json.loads(value) if isinstance(value, str) else value
    text = str(value)
    return text[1:-1] if text.startswith('"') and text.endswith('"') else text


def test_random_workload_equals_the_server(spark, tmp_path):
    print(f"seed {_SEED} (re-run: BINLAKE_FUZZ_SEED={_SEED})")
    rng = random.Random(_SEED)
    binlogs = tmp_path / "binlogs"
    (tmp_path / "server_tmp").mkdir()
    early = load_config(env={}, overrides={"lake.root": str(tmp_path / "early")})
    late = load_config(env={}, overrides={"lake.root": str(tmp_path / "late")})
    w = Workload(rng)
    w.parts = Partitioned(random.Random(f"{_SEED}p"))
    statements: list[str] = []
    with MariaDBServer(extra_options={"tmpdir": str(tmp_path / "server_tmp")}) as server:
        dsn = Dsn.parse(server.dsn())

        def snap(cfg) -> None:
            snapshot, checks = take_snapshot(dsn, source_id=cfg.source.name, schemas=["rw"])
            save_snapshot(spark, cfg, snapshot, checks)

        with server.connect() as conn:
            ddl = _ddl(rng) + [w.parts.create()]
            statements += ddl
            for s in ddl:
                _execute(conn, s)
            snap(early)
            moments = []
            for _ in range(4):
                for _ in range(rng.randint(8, 14)):
                    s = w.statement()
                    statements.append(s)
                    _execute(conn, s)
                    for s in w.parts.statements():
                        statements.append(s)
                        _execute(conn, s)
                moments.append(_moment(conn, w))
            print("\n".join(statements))
            server.copy_closed_binlogs(binlogs)
            _index(early.lake.root, binlogs)
            _check(spark, early, moments, conn, w.tables(), "early")
            _index(late.lake.root, binlogs)
            snap(late)
            run_silver(spark, late)
            _check(spark, late, moments, conn, w.tables(), "late")
            _flashback_since(server, early, moments[rng.randrange(len(moments) - 1)],
                             moments[-1], w)
