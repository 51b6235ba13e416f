"""Unit tests of the derived row changes (pipelines/silver/derive.py, fk_gaps.py): no engine.

Rows are silver rows as dicts, fed in seq order; the rules are what a snapshot records.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from pipelines.silver.derive import (ADD_COLUMNS, TRUNCATE, AddedColumn, Fold, Rule,
                                     added_columns, cascading_rules, truncated_table)
from pipelines.silver.derive import partition_change
from pipelines.silver.fk_gaps import fk_gaps
from pipelines.silver.naming import NamingPlan, position_key

F = "mariadb-bin.000003"
BASE = 3 << 32


def _row(pos, event, table, before=None, after=None, rie=0, end=None, gtid="0-1-1"):
    pk = json.loads(before or after)["id"]
    return {"source_id": "s", "server_id": 1, "server_uuid": None, "binlog_file": F,
            "start_pos": pos, "end_pos": end or pos + 100, "row_in_event": rie,
            "seq": BASE + pos + rie, "event_timestamp": None, "gtid": gtid,
            "connection_id": None, "schema_name": "d", "table_name": table,
            "event_type": event, "pk_values": str(pk), "pk_kind": "primary_key",
            "row_before": before, "row_after": after, "absent_columns": None,
            "schema_version": "snap", "query_text": None, "commit_ts_us": None,
            "origin": "binlog"}


def _fold(rules):
    return Fold({("d", "p"): ["id"], ("d", "c"): ["id"], ("d", "g"): ["id"]},
                lambda source, parent, seq: [r for r in rules if r.parent == parent],
                lambda r: True)


CASCADE = Rule("c_p", ("d", "c"), ("pid",), ("d", "p"), ("id",), "CASCADE", "CASCADE")
SET_NULL = Rule("g_c", ("d", "g"), ("cid",), ("d", "c"), ("id",), "SET NULL", "SET NULL")


def _history():
    return [_row(10, "INSERT", "p", after='{"id": 1}'),
            _row(20, "INSERT", "c", after='{"id": 5, "pid": 1}'),
            _row(20, "INSERT", "c", after='{"id": 6, "pid": 2}', rie=1),
            _row(30, "INSERT", "g", after='{"id": 9, "cid": 5}')]


def test_a_parent_delete_cascades_two_levels_after_the_cause_event():
    fold = _fold([CASCADE, SET_NULL])
    fold.rows_in_event = {("s", F, 40): 1}
    rows = _history() + [_row(40, "DELETE", "p", before='{"id": 1}', end=45)]
    out = list(fold.feed(rows))
    assert [(d["table_name"], d["event_type"], d["origin"], d["row_in_event"], d["seq"])
            for d in out] == [("c", "DELETE", "fk_cascade", 1, BASE + 41),
                              ("g", "UPDATE", "fk_set_null", 2, BASE + 42)]
    assert out[1]["row_before"] == '{"id": 9, "cid": 5}'
    assert out[1]["row_after"] == '{"id": 9, "cid": null}'
    assert out[1]["changed_columns"] == '["cid"]' and out[1]["pk_values"] == "9"
    assert all(d["binlog_file"] == F and d["start_pos"] == 40 and d["gtid"] == "0-1-1"
               for d in out)


def test_seq_is_clamped_below_the_next_event():
    fold = _fold([CASCADE])
    fold.rows_in_event = {("s", F, 40): 1}
    rows = [_row(10, "INSERT", "p", after='{"id": 1}')] + [
        _row(20, "INSERT", "c", after=f'{{"id": {i}, "pid": 1}}', rie=i) for i in range(5)] + [
        _row(40, "DELETE", "p", before='{"id": 1}', end=43)]
    out = list(fold.feed(rows))
    assert [d["row_in_event"] for d in out] == [1, 2, 3, 4, 5]
    assert [d["seq"] for d in out] == [BASE + 41, BASE + 42, BASE + 42, BASE + 42, BASE + 42]


def test_update_cascade_and_set_null_follow_a_key_change_only():
    rules = [Rule("c_p", ("d", "c"), ("pid",), ("d", "p"), ("id",), "RESTRICT", "CASCADE")]
    fold = _fold(rules)
    rows = _history()[:3] + [
        _row(40, "UPDATE", "p", before='{"id": 1}', after='{"id": 1}'),  # key unchanged
        _row(50, "UPDATE", "p", before='{"id": 1}', after='{"id": 7}')]
    out = list(fold.feed(rows))
    assert [(d["pk_values"], d["row_after"], d["start_pos"]) for d in out] == [
        ("5", '{"id": 5, "pid": 7}', 50)]


def test_truncate_deletes_the_alive_rows_once():
    fold = _fold([])
    marker = {**_row(40, "INSERT", "c", after='{"id": 0}'), "event_type": TRUNCATE,
              "row_in_event": -1, "seq": BASE + 40}
    rows = _history()[1:3] + [_row(30, "DELETE", "c", before='{"id": 6, "pid": 2}'), marker]
    out = list(fold.feed(rows))
    assert [(d["event_type"], d["pk_values"], d["origin"], d["row_in_event"]) for d in out] == [
        ("DELETE", "5", "truncate", 0)]


def test_no_derivation_where_the_binlog_logs_the_child_itself():
    fold = _fold([CASCADE])
    child_del = _row(50, "DELETE", "c", before='{"id": 5, "pid": 1}')
    fold.logged = {("0-1-1", "s", "d", "c", "5"): [child_del["seq"]]}
    rows = _history()[:2] + [_row(40, "DELETE", "p", before='{"id": 1}'), child_del]
    assert list(fold.feed(rows)) == []


def test_truncate_statements():
    assert truncated_table("TRUNCATE TABLE `a`.`b`", None) == ("a", "b")
    assert truncated_table("truncate t", "db") == ("db", "t")
    assert truncated_table("/* x */ TRUNCATE TABLE t;", "db") == ("db", "t")
    assert truncated_table("TRUNCATE TABLE t PARTITION p", "db") is None
    assert truncated_table("DELETE FROM t", "db") is None


def _fk(child, parent, on_delete, on_update="RESTRICT", name="fk1"):
    return SimpleNamespace(constraint_schema="d", constraint_name=name, table_schema="d",
                           table_name=child, column_name="pid", ordinal_position=1,
                           referenced_table_schema="d", referenced_table_name=parent,
                           referenced_column_name="id", update_rule=on_update,
                           delete_rule=on_delete)


def test_only_cascading_rules_are_kept():
    rules = cascading_rules([_fk("c", "p", "CASCADE"), _fk("x", "p", "RESTRICT", name="f2")])
    assert rules == [Rule("fk1", ("d", "c"), ("pid",), ("d", "p"), ("id",), "CASCADE",
                          "RESTRICT")]


def _snap(pos, fks):
    return SimpleNamespace(snapshot_id=f"s{pos}", source_id="s", binlog_file=F,
                           binlog_pos=pos, fks=fks,
                           tables={("d", "c"): object(), ("d", "p"): object()})


def test_fk_gaps_name_the_epochs_no_snapshot_describes():
    ddl = [("s", F, 100, "d", "CREATE TABLE p (id INT PRIMARY KEY)"),
           ("s", F, 200, "d", "CREATE TABLE c (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) "
                              "REFERENCES p (id) ON DELETE CASCADE)"),
           ("s", F, 400, "d", "ALTER TABLE c ADD COLUMN v INT")]
    # no snapshot: the CREATE's epoch and the ALTER's are unknown
    gaps = fk_gaps(ddl, [], NamingPlan.build(ddl, []))
    assert [(g.table, g.opened_at) for g in gaps] == [("c", f"{F}:200"), ("c", f"{F}:400")]
    # a snapshot after the CREATE covers its epoch; the ALTER's stays a gap
    snaps = [_snap(300, [_fk("c", "p", "CASCADE")])]
    gaps = fk_gaps(ddl, snaps, NamingPlan.build(ddl, snaps))
    assert [(g.table, g.start) for g in gaps] == [("c", position_key(F, 400))]
    assert "take a `binlake snapshot`" in gaps[0].describe()
    # RESTRICT rules change no child row: nothing to flag
    plain = [ddl[0], ("s", F, 200, "d", "CREATE TABLE c (id INT PRIMARY KEY, pid INT, "
                                        "FOREIGN KEY (pid) REFERENCES p (id))")]
    assert fk_gaps(plain, [], NamingPlan.build(plain, [])) == []


def test_add_column_defaults_fill_the_alive_rows():
    table, added = added_columns("ALTER TABLE c ADD COLUMN w INT NOT NULL DEFAULT 7, "
                                 "ADD src VARCHAR(9) DEFAULT 'it''s' AFTER id, ADD INDEX (w), "
                                 "ADD n INT, ADD d DATETIME DEFAULT '2020-01-01'", "d")
    assert table == ("d", "c") and added == [AddedColumn("w", "7"),
                                             AddedColumn("src", '"it\'s"', after="id"),
                                             AddedColumn("d", '"2020-01-01 00:00:00"')]
    assert added_columns("ALTER TABLE c ADD COLUMN t TEXT NOT NULL FIRST", "d")[1] == [
        AddedColumn("t", '""', first=True)]
    assert added_columns("ALTER TABLE c ADD COLUMN n INT NULL", "d") is None
    fold = _fold([])
    marker = {**_row(40, "INSERT", "c", after='{"id": 0}'), "event_type": ADD_COLUMNS,
              "row_in_event": -1, "seq": BASE + 40, "added": added, "schema_version": "s2"}
    out = list(fold.feed(_history()[1:3] + [marker]))
    assert [(d["pk_values"], d["row_after"], d["changed_columns"], d["origin"],
             d["schema_version"]) for d in out] == [
        ("5", '{"id": 5, "src": "it\'s", "pid": 1, "w": 7, "d": "2020-01-01 00:00:00"}',
         '["w", "src", "d"]', "ddl", "s2"),
        ("6", '{"id": 6, "src": "it\'s", "pid": 2, "w": 7, "d": "2020-01-01 00:00:00"}',
         '["w", "src", "d"]', "ddl", "s2")]


def test_partition_drops_are_flagged_truncate_all_is_derived():
    assert partition_change("ALTER TABLE t TRUNCATE PARTITION ALL", "d") == (
        ("d", "t"), "TRUNCATE", ["ALL"])
    assert partition_change("ALTER TABLE d.t DROP PARTITION p0, `p1`", None) == (
        ("d", "t"), "DROP", ["p0", "p1"])
    ddl = [("s", F, 100, "d", "ALTER TABLE t DROP PARTITION p0"),
           ("s", F, 200, "d", "ALTER TABLE t TRUNCATE PARTITION ALL")]
    gaps = fk_gaps(ddl, [], NamingPlan.build(ddl, []))
    assert [(g.table, g.start) for g in gaps] == [("t", position_key(F, 100))]
    assert gaps[0].describe().startswith("d.t: DROP PARTITION p0 at mariadb-bin.000003:100 ")
    fold = _fold([])
    marker = {**_row(40, "INSERT", "c", after='{"id": 0}'), "event_type": TRUNCATE,
              "row_in_event": -1, "seq": BASE + 40, "derived_origin": "partition"}
    assert [d["origin"] for d in fold.feed(_history()[1:3] + [marker])] == ["partition"] * 2


def test_new_derived_rows_are_numbered_after_what_silver_holds_at_their_place():
    # A file derived again after a snapshot named one more rule: silver holds rows 0-1
    # (logged) and 2 (the cascade known before) at pos 400; the fold's new rows come after
    # them in the fold's order, seq clamped to the event's end; another place starts after
    # its own logged rows.
    from pipelines.silver.derived import numbered

    new = [dict(_row(400, "DELETE", "g", before='{"id": 9}', rie=3, end=404)),
           dict(_row(400, "DELETE", "c", before='{"id": 5}', rie=2, end=404)),
           dict(_row(700, "DELETE", "c", before='{"id": 6}', rie=1))]
    got = numbered(new, {("s", F, 400): 2, ("s", F, 700): 0})
    assert [(r["start_pos"], r["table_name"], r["row_in_event"], r["seq"]) for r in got] == [
        (400, "c", 3, BASE + 403), (400, "g", 4, BASE + 403), (700, "c", 1, BASE + 701)]


def test_the_derivation_digest_changes_with_the_rules_and_their_gaps_only():
    from pipelines.silver.derived import derivation_digest
    from pipelines.silver.fk_gaps import FkGap

    def snap(sid, *fks):
        return SimpleNamespace(snapshot_id=sid, fks=list(fks))

    def fk(table, parent, rule):
        return SimpleNamespace(constraint_schema="d", constraint_name=f"{table}_fk",
                               table_schema="d", table_name=table, column_name="pid",
                               ordinal_position=1, referenced_table_schema="d",
                               referenced_table_name=parent, referenced_column_name="id",
                               update_rule="RESTRICT", delete_rule=rule)

    gap = FkGap("s", "d", "c", -1, 500, "the start of the binlogs")
    one = derivation_digest([snap("a", fk("c", "p", "CASCADE"))], [gap])
    assert one == derivation_digest([snap("b", fk("c", "p", "CASCADE"))], [gap])  # same rules
    assert one != derivation_digest([snap("a", fk("c", "p", "CASCADE"))], [])  # gap filled
    assert one != derivation_digest([snap("a", fk("c", "p", "SET NULL"))], [gap])
    assert one == derivation_digest([snap("a", fk("c", "p", "CASCADE"), fk("x", "p",
                                                                         "RESTRICT"))], [gap])


def test_a_dropped_column_leaves_the_alive_rows():
    # ADD COLUMN x, DROP COLUMN x, ADD COLUMN w: the last one's UPDATEs carry the server's
    # columns (the random workload's seed 7: the image kept x, the mirror lost an UPDATE)
    from pipelines.silver.derive import DROP_COLUMNS, dropped_columns

    assert dropped_columns("ALTER TABLE c DROP COLUMN x, DROP INDEX i, DROP y, "
                           "DROP PRIMARY KEY, DROP FOREIGN KEY f, DROP PARTITION p", "d") == (
        ("d", "c"), ["x", "y"])
    assert dropped_columns("ALTER TABLE c DROP IF EXISTS `a``b`", "d") == (("d", "c"), ["a`b"])
    assert dropped_columns("ALTER TABLE c DROP INDEX i", "d") is None
    assert dropped_columns("ALTER TABLE c ADD COLUMN x INT", "d") is None
    fold = _fold([])
    drop = {**_row(40, "INSERT", "c", after='{"id": 0}'), "event_type": DROP_COLUMNS,
            "row_in_event": -1, "seq": BASE + 40, "dropped": ["pid"]}
    add = {**_row(50, "INSERT", "c", after='{"id": 0}'), "event_type": ADD_COLUMNS,
           "row_in_event": -1, "seq": BASE + 50, "added": [AddedColumn("w", "7")],
           "schema_version": "s3"}
    out = list(fold.feed(_history()[1:3] + [drop, add]))
    assert [(d["pk_values"], d["row_before"], d["row_after"]) for d in out] == [
        ("5", '{"id": 5}', '{"id": 5, "w": 7}'), ("6", '{"id": 6}', '{"id": 6, "w": 7}')]


def test_a_logged_key_change_moves_the_row_without_a_snapshot():
    # No snapshot names the table's key (renamed since, or none taken): the UPDATE's
    # pk_values_after says where the row went (the random workload's seed 21: the row
    # stayed under its old key and an ADD COLUMN filled a stale copy of it too)
    fold = Fold({}, lambda source, parent, seq: [], lambda r: True)
    moved = {**_row(30, "UPDATE", "c", before='{"id": 6, "v": 30}',
                    after='{"id": 36, "v": 31}'), "pk_values_after": "36"}
    later = _row(40, "UPDATE", "c", before='{"id": 36, "v": 31}', after='{"id": 36, "v": 32}')
    truncate = {**_row(50, "INSERT", "c", after='{"id": 0}'), "event_type": TRUNCATE,
                "row_in_event": -1, "seq": BASE + 50}
    rows = [_row(20, "INSERT", "c", after='{"id": 6, "v": 30}'), moved, later, truncate]
    assert [(d["pk_values"], d["row_before"]) for d in fold.feed(rows)] == [
        ("36", '{"id": 36, "v": 32}')]
