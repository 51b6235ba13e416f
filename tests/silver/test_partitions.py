"""``silver/partitions``: the rows a DROP/TRUNCATE PARTITION removed, from the partitioning
the DDL declared. Expected placements are the server's: MariaDB 10.11's own
``SELECT … PARTITION (p)`` of the same tables (written down beside each case)."""

from __future__ import annotations

import pytest

from pipelines.silver.derive import TRUNCATE, Fold
from pipelines.silver.partitions import holds, parse_partitioning, partition_effects

F = "mariadb-bin.000003"


def _effects(*statements: str):
    return partition_effects([("s", F, 100 * (i + 1), "d", q) for i, q in enumerate(statements)])


def _placed(spec, values):
    return [v for v in values if holds(spec, {"id": str(v)})]


def test_hash_places_by_the_remainders_absolute_value():
    # MariaDB 10.11, PARTITION BY HASH (id) PARTITIONS 3 holding -7..7:
    # p0 [-6, -3, 0, 3, 6], p1 [-7, -4, -1, 1, 4, 7], p2 [-5, -2, 2, 5]
    server = {"p0": [-6, -3, 0, 3, 6], "p1": [-7, -4, -1, 1, 4, 7], "p2": [-5, -2, 2, 5]}
    for name, rows in server.items():
        (e,) = _effects("CREATE TABLE h (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 3",
                        f"ALTER TABLE h TRUNCATE PARTITION {name}")
        assert _placed(e.spec, range(-7, 8)) == rows, name
    assert holds(e.spec, {"id": "null"}) is False  # NULL: p0


def test_range_of_to_days_evaluates_the_bound_and_the_value():
    # TO_DAYS('2020-01-01') = 737790 on the server; '2019-12-31 23:59:59' lies in a,
    # '2020-01-01 00:00:00' in b (SELECT … PARTITION (a) / (b))
    (e,) = _effects("CREATE TABLE r (id INT, d DATETIME, PRIMARY KEY (id, d)) PARTITION BY "
                    "RANGE (TO_DAYS(d)) (PARTITION a VALUES LESS THAN (TO_DAYS('2020-01-01')), "
                    "PARTITION b VALUES LESS THAN MAXVALUE)",
                    "ALTER TABLE r DROP PARTITION a")
    assert e.spec["bounds"] == [[737790], ["MAXVALUE"]]
    assert holds(e.spec, {"id": "1", "d": '"2019-12-31 23:59:59"'})
    assert not holds(e.spec, {"id": "2", "d": '"2020-01-01 00:00:00"'})
    assert holds(e.spec, {"id": "3", "d": "null"})  # NULL: below every bound, the first


@pytest.mark.parametrize("ddl, later, drop, rows, kept", [
    # RANGE: a dropped partition's range falls to the next one
    ("PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
     "PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)",
     ["ALTER TABLE t DROP PARTITION p0"], "ALTER TABLE t TRUNCATE PARTITION p1",
     [1, 9, 10, 19, 20], [1, 9, 10, 19]),
    # RANGE COLUMNS with ADD PARTITION after
    ("PARTITION BY RANGE COLUMNS (id) (PARTITION p0 VALUES LESS THAN (5))",
     ["ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (MAXVALUE))"],
     "ALTER TABLE t DROP PARTITION p1", [4, 5, 99], [5, 99]),
    # LIST, one partition reorganized into two
    ("PARTITION BY LIST (id) (PARTITION a VALUES IN (1, 2), PARTITION b VALUES IN (3, 4))",
     ["ALTER TABLE t REORGANIZE PARTITION b INTO (PARTITION b1 VALUES IN (3), "
      "PARTITION b2 VALUES IN (4, 5))"],
     "ALTER TABLE t DROP PARTITION b2", [1, 3, 4, 5], [4, 5]),
    # HASH grown by ADD PARTITION PARTITIONS: placed by the new count
    ("PARTITION BY HASH (id) PARTITIONS 2", ["ALTER TABLE t ADD PARTITION PARTITIONS 2"],
     "ALTER TABLE t TRUNCATE PARTITION p3", [3, 4, 7, 8], [3, 7]),
    # a rename carries the partitioning to the new name
    ("PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
     "PARTITION p1 VALUES LESS THAN MAXVALUE)", ["RENAME TABLE t TO u"],
     "ALTER TABLE u DROP PARTITION `P0`", [1, 10], [1]),
])
def test_the_partitioning_follows_the_ddl(ddl, later, drop, rows, kept):
    effects = _effects(f"CREATE TABLE t (id INT PRIMARY KEY) {ddl}", *later, drop)
    assert effects[-1].reason is None, effects[-1]
    assert _placed(effects[-1].spec, rows) == kept


@pytest.mark.parametrize("statements, reason", [
    (["ALTER TABLE t DROP PARTITION p0"], "CREATE TABLE is not in the binlogs"),
    (["CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY KEY (id) PARTITIONS 2",
      "ALTER TABLE t TRUNCATE PARTITION p0"], "KEY partitioning"),
    (["CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY LINEAR HASH (id) PARTITIONS 2",
      "ALTER TABLE t TRUNCATE PARTITION p0"], "LINEAR HASH partitioning"),
    (["CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY RANGE (id DIV 2) "
      "(PARTITION p0 VALUES LESS THAN (5), PARTITION p1 VALUES LESS THAN MAXVALUE)",
      "ALTER TABLE t DROP PARTITION p0"], "by the expression 'id DIV 2'"),
    (["CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(5)) PARTITION BY LIST COLUMNS (s) "
      "(PARTITION a VALUES IN ('x'), PARTITION b VALUES IN ('y'))",
      "ALTER TABLE t DROP PARTITION a"], "the partition values"),
    (["CREATE TABLE t (id INT, d DATE, PRIMARY KEY (id, d)) PARTITION BY RANGE (YEAR(d)) "
      "SUBPARTITION BY HASH (TO_DAYS(d)) SUBPARTITIONS 2 "
      "(PARTITION p0 VALUES LESS THAN (2000), PARTITION p1 VALUES LESS THAN MAXVALUE)",
      "ALTER TABLE t DROP PARTITION p0"], "sub-partitions"),
    (["CREATE TABLE t (id INT PRIMARY KEY)", "ALTER TABLE t TRUNCATE PARTITION p0"],
     "not partitioned"),
    (["CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2",
      "ALTER TABLE t REMOVE PARTITIONING", "ALTER TABLE t TRUNCATE PARTITION p0"],
     "not partitioned"),
])
def test_what_cannot_be_known_says_why(statements, reason):
    effects = _effects(*statements)
    assert effects[-1].spec is None and reason in effects[-1].reason, effects[-1]


def test_exchange_and_truncate_all():
    effects = _effects("CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2",
                       "ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE d.other",
                       "ALTER TABLE t TRUNCATE PARTITION ALL")  # a TRUNCATE: derive's
    assert [(e.table, e.spec) for e in effects] == [(("d", "t"), None), (("d", "other"), None)]
    assert "swapped" in effects[0].reason


def test_a_create_table_without_partitions_and_versioned_comments():
    assert parse_partitioning("(id INT PRIMARY KEY, PARTITION_ INT) ENGINE=InnoDB") is None
    (e,) = _effects("CREATE TABLE t (id INT PRIMARY KEY) /*!50100 PARTITION BY RANGE (id) "
                    "(PARTITION p0 VALUES LESS THAN (3) ENGINE = InnoDB, "
                    "PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE = InnoDB) */",
                    "ALTER TABLE t DROP PARTITION p0")
    assert _placed(e.spec, [2, 3]) == [2]


def test_the_fold_deletes_the_partitions_alive_rows_only():
    (e,) = _effects("CREATE TABLE t (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                    "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
                    "ALTER TABLE t DROP PARTITION p0")

    def row(seq, kind, pk, before=None, after=None):
        return {"source_id": "s", "binlog_file": F, "start_pos": seq, "end_pos": seq + 50,
                "row_in_event": 0, "seq": seq, "schema_name": "d", "table_name": "t",
                "event_type": kind, "pk_values": pk, "pk_kind": "primary_key",
                "row_before": before, "row_after": after, "schema_version": "binlog",
                "gtid": None, "origin": "binlog", "absent_columns": None,
                "pk_values_after": None}

    rows = [row(10, "INSERT", "1", after='{"id": 1, "v": 0}'),
            row(11, "INSERT", "12", after='{"id": 12, "v": 0}'),
            row(12, "INSERT", "5", after='{"id": 5, "v": 0}'),
            row(13, "DELETE", "5", before='{"id": 5, "v": 0}'),
            {**row(200, TRUNCATE, None), "row_in_event": -1, "derived_origin": "partition",
             "partition": e.spec}]
    fold = Fold({("d", "t"): ["id"]}, lambda *a: [], lambda r: True)
    out = list(fold.feed(rows))
    assert [(d["event_type"], d["pk_values"], d["origin"], d["row_before"]) for d in out] == [
        ("DELETE", "1", "partition", '{"id": 1, "v": 0}')]
    assert sorted(fold.state[("s", "d", "t")]) == ["12"]


@pytest.mark.parametrize("drop, known", [
    ("DROP TABLE IF EXISTS t, u RESTRICT", {"t2"}), ("DROP DATABASE d", set()),
    ("DROP TABLE d.t2", {"t"})])
def test_like_copies_and_drops_forget_the_partitioning(drop, known):
    effects = _effects("CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2",
                       "CREATE TABLE t2 LIKE t", drop, "ALTER TABLE t TRUNCATE PARTITION p0",
                       "ALTER TABLE t2 TRUNCATE PARTITION p1")
    assert {e.table[1] for e in effects if e.spec is not None} == known
    assert all("CREATE TABLE is not in the binlogs" in e.reason
               for e in effects if e.spec is None)
