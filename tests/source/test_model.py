"""Snapshot model, checks and charsets without a server or Spark: table-driven."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from pipelines.silver.charsets import (
    charset_for_collation, collation_name, decode_text, python_codec,
)
from pipelines.source.model import (
    ColumnSchema, ForeignKey, Snapshot, SNAPSHOT_COLUMNS, FK_COLUMNS, TableSchema,
    fk_to_rows, parse_enum_values, snapshot_from_json, snapshot_to_json, snapshot_to_rows,
    snapshots_from_rows,
)
from pipelines.source.checks import (cascades_are_logged, fk_cascade_check, schema_checks,
                                     server_checks)
from pipelines.source.schema import is_ddl_event

# COLUMN_TYPE text as MySQL/MariaDB print it → labels. Quotes are doubled, backslashes
# doubled (sql/sql_show.cc append_unescaped); commas and spaces are plain label text.
ENUMS = [
    ("enum('a','b')", ["a", "b"]),
    ("enum('b''c')", ["b'c"]),
    ("enum('d,e','f')", ["d,e", "f"]),
    ("enum('x\\\\y')", ["x\\y"]),
    ("enum('it\\'s')", ["it's"]),
    ("enum('','a b',' ')", ["", "a b", " "]),
    ("set('x','y''','z\\\\')", ["x", "y'", "z\\"]),
    ("enum('é','😀','''')", ["é", "😀", "'"]),
    ("enum('a\\nb','\\0')", ["a\nb", "\0"]),
    ("enum('a','b') ", ["a", "b"]),
]


@pytest.mark.parametrize("column_type,labels", ENUMS)
def test_enum_labels(column_type, labels):
    assert parse_enum_values(column_type) == labels


@pytest.mark.parametrize("bad", ["enum(a)", "enum('a'", "int(11)", "enum('a' 'b')", "enum('a',)"])
def test_enum_labels_reject_bad_text(bad):
    with pytest.raises(ValueError):
        parse_enum_values(bad)


# (data_type, column_type) → (unsigned, zerofill, fsp, enum_values, set_values)
TYPES = [
    ("int", "int(10) unsigned zerofill", (True, True, None, None, None)),
    ("int", "int(11)", (False, False, None, None, None)),
    ("bigint", "bigint unsigned", (True, False, None, None, None)),
    ("decimal", "decimal(65,30)", (False, False, None, None, None)),
    ("decimal", "decimal(10,2) unsigned", (True, False, None, None, None)),
    ("datetime", "datetime(6)", (False, False, 6, None, None)),
    ("datetime", "datetime", (False, False, 0, None, None)),
    ("timestamp", "timestamp(3)", (False, False, 3, None, None)),
    ("time", "time", (False, False, 0, None, None)),
    ("date", "date", (False, False, None, None, None)),
    ("enum", "enum('a','unsigned')", (False, False, None, ["a", "unsigned"], None)),
    ("set", "set('x','y')", (False, False, None, None, ["x", "y"])),
    ("varchar", "varchar(20)", (False, False, None, None, None)),
]


@pytest.mark.parametrize("data_type,column_type,expected", TYPES)
def test_column_properties(data_type, column_type, expected):
    c = ColumnSchema("c", 1, data_type, column_type)
    assert (c.unsigned, c.zerofill, c.fsp, c.enum_values, c.set_values) == expected


def _col(name, ordinal, pk=None, **kw):
    return ColumnSchema(name, ordinal, kw.pop("data_type", "int"), kw.pop("column_type", "int(11)"),
                        pk_ordinal=pk, **kw)


def test_composite_key_out_of_column_order():
    t = TableSchema("s", "t", [_col("c", 3, pk=1), _col("a", 1, pk=2), _col("b", 2)])
    assert t.column_names == ["a", "b", "c"]
    assert t.primary_key == ["c", "a"]          # key order
    assert t.pk_columns == ["a", "c"]           # pk_values: table ordinal order
    assert t.pk_kind == "primary_key"


def test_table_without_primary_key_uses_all_columns():
    t = TableSchema("s", "t", [_col("u", 1, column_key="PRI"), _col("v", 2)])
    assert t.primary_key == [] and not t.has_primary_key
    assert (t.pk_kind, t.pk_columns) == ("all_columns", ["u", "v"])


def _snapshot(**over) -> Snapshot:
    tables = {
        ("shop", "line"): TableSchema("shop", "line", [
            _col("a", 1, pk=2, nullable=False, column_key="PRI"),
            ColumnSchema("b", 2, "varchar", "varchar(10)", "latin1", "latin1_swedish_ci",
                         True, "'x'"),
            _col("c", 3, pk=1, nullable=False, column_key="PRI"),
            ColumnSchema("j", 4, "longtext", "longtext", "utf8mb4", "utf8mb4_bin", True, "NULL",
                         is_json=True),
            ColumnSchema("e", 5, "enum", "enum('a','b''c')", "utf8mb4", "utf8mb4_general_ci"),
            ColumnSchema("g", 6, "int", "int(11)", generated=True)]),
        ("shop", "nopk"): TableSchema("shop", "nopk", [_col("u", 1)]),
    }
    fks = [ForeignKey("shop", "fk", "shop", "child", col, i, "shop", "line", ref, "SET NULL",
                      "CASCADE") for i, (col, ref) in enumerate([("p_c", "c"), ("p_a", "a")], 1)]
    base = dict(snapshot_id="20240501T120000Z-0a0b0c0d",
                snapshot_time=dt.datetime(2024, 5, 1, 12, 0, 0, 123456), source_id="src",
                server_id=7, server_uuid=None, server_version="10.11.19-MariaDB",
                binlog_file="mariadb-bin.000003", binlog_pos=1234, gtid_executed="0-7-42",
                tables=tables, fks=fks)
    base.update(over)
    return Snapshot(**base)


def test_coordinate_and_seq():
    s = _snapshot()
    assert s.coordinate == (3, 1234)
    assert s.seq == 3 * 2**32 + 1234
    assert _snapshot(binlog_file=None, binlog_pos=None).coordinate is None


def test_flat_rows_round_trip():
    s = _snapshot()
    rows = [dict(zip([n for n, _ in SNAPSHOT_COLUMNS], r)) for r in snapshot_to_rows(s)]
    fk_rows = [dict(zip([n for n, _ in FK_COLUMNS], r)) for r in fk_to_rows(s)]
    assert len(rows) == s.column_count == 7
    assert all(len(r) == len(SNAPSHOT_COLUMNS) for r in snapshot_to_rows(s))
    assert snapshots_from_rows(reversed(rows), fk_rows) == [s]


def test_empty_snapshot_keeps_one_row():
    s = _snapshot(tables={}, fks=[])
    rows = snapshot_to_rows(s)
    assert len(rows) == 1 and rows[0][9:] == (None,) * (len(SNAPSHOT_COLUMNS) - 9)
    named = [dict(zip([n for n, _ in SNAPSHOT_COLUMNS], r)) for r in rows]
    assert snapshots_from_rows(named) == [s]


def test_json_round_trip():
    s = _snapshot()
    text = json.dumps(snapshot_to_json(s))
    assert snapshot_from_json(json.loads(text)) == s


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.pop("binlog_pos"), "missing 'binlog_pos'"),
    (lambda d: d.update(server_id="7"), "'server_id' must be int"),
    (lambda d: d.update(snapshot_time="yesterday"), "not ISO 8601"),
    (lambda d: d["tables"][0]["columns"][0].update(nullable="NO"), "'nullable' must be bool"),
    (lambda d: d["tables"][0].update(columns=[]), "without columns"),
    (lambda d: d["tables"].append(d["tables"][0]), "appears twice"),
    (lambda d: d["fks"][0].update(ordinal_position=None), "'ordinal_position' must be int"),
    (lambda d: d.update(binlog_file="nonumber"), "numeric suffix"),
])
def test_json_validation_names_the_field(mutate, message):
    doc = snapshot_to_json(_snapshot())
    mutate(doc)
    with pytest.raises(ValueError, match=message):
        snapshot_from_json(doc)


# -- checks ----------------------------------------------------------------------------------

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL"}


@pytest.mark.parametrize("over,name,level", [
    ({}, "binlog_format", "ok"),
    ({"binlog_format": "STATEMENT"}, "binlog_format", "refuse"),
    ({"binlog_format": "MIXED"}, "binlog_format", "refuse"),
    ({"log_bin": "OFF"}, "log_bin", "refuse"),
    ({"binlog_row_image": "MINIMAL"}, "binlog_row_image", "warn"),
    ({"binlog_row_image": "NOBLOB"}, "binlog_row_image", "warn"),
    ({"binlog_row_value_options": "PARTIAL_JSON"}, "binlog_row_value_options", "warn"),
    ({"binlog_row_value_options": ""}, "binlog_row_value_options", "ok"),
    ({"binlog_row_metadata": "MINIMAL"}, "binlog_row_metadata", "warn"),
])
def test_server_checks(over, name, level):
    checks = {c.name: c for c in server_checks({**GOOD, **over})}
    assert checks[name].level == level


def test_row_metadata_absent_means_names_from_snapshots():
    v = dict(GOOD)
    del v["binlog_row_metadata"]
    check = {c.name: c for c in server_checks(v)}["binlog_row_metadata"]
    assert check.level == "warn" and "snapshots" in check.detail


@pytest.mark.parametrize("version,variables,logged", [
    ("10.11.19-MariaDB-log", {}, False),
    ("11.8.2-MariaDB", {}, False),
    ("5.7.44-log", {}, False),
    ("8.0.36", {}, False),
    ("8.4.3", {}, False),
    ("9.5.0", {}, False),
    ("9.6.0", {"innodb_native_foreign_keys": "OFF"}, True),
    ("9.6.0", {"innodb_native_foreign_keys": "ON"}, False),
    ("9.7.0", {}, True),
])
def test_cascades_are_logged(version, variables, logged):
    assert cascades_are_logged(version, variables) is logged


def test_cascade_and_no_pk_checks():
    s = _snapshot()
    cascade = fk_cascade_check(s)
    assert cascade.level == "warn" and "NOT IN THE BINLOG" in cascade.detail
    assert "shop.child.fk (ON DELETE CASCADE ON UPDATE SET NULL)" in cascade.detail
    assert fk_cascade_check(_snapshot(server_version="9.6.1")).level == "ok"
    restrict = [ForeignKey("shop", "fk", "shop", "child", "x", 1, "shop", "line", "a",
                           "RESTRICT", "NO ACTION")]
    assert fk_cascade_check(_snapshot(fks=restrict)).level == "ok"
    pk = {c.name: c for c in schema_checks(s)}["primary_key"]
    assert pk.level == "warn" and "shop.nopk" in pk.detail and "shop.line" not in pk.detail


@pytest.mark.parametrize("etype,info,ddl", [
    ("Query", "BEGIN", False),
    ("Query", "COMMIT", False),
    ("Query", "use `shop`; ALTER TABLE t ADD c int", True),
    ("Query", "CREATE TABLE x (a int)", True),
    ("Query", "XA START X'01',X'',1", False),
    ("Xid", "COMMIT /* xid=12 */", False),
    ("Gtid", "BEGIN GTID 0-1-5", False),
    ("Write_rows_v1", "table_id: 33 flags: STMT_END_F", False),
])
def test_is_ddl_event(etype, info, ddl):
    assert is_ddl_event(etype, info) is ddl


# -- charsets --------------------------------------------------------------------------------

@pytest.mark.parametrize("cid,charset,name", [
    (8, "latin1", "latin1_swedish_ci"),
    (33, "utf8mb3", "utf8mb3_general_ci"),
    (45, "utf8mb4", "utf8mb4_general_ci"),
    (46, "utf8mb4", "utf8mb4_bin"),
    (63, "binary", "binary"),
    (83, "utf8mb3", "utf8mb3_bin"),
    (224, "utf8mb4", "utf8mb4_unicode_ci"),
    (248, "gb18030", "gb18030_chinese_ci"),
    (255, "utf8mb4", "utf8mb4_0900_ai_ci"),
    (309, "utf8mb4", "utf8mb4_0900_bin"),
    (323, "utf8mb4", "utf8mb4_mn_cyrl_0900_as_cs"),
    (2048, "utf8mb3", "utf8mb3_uca1400_ai_ci"),
])
def test_charset_for_collation(cid, charset, name):
    assert charset_for_collation(cid) == charset
    assert collation_name(cid) == name


def test_unknown_collation_id():
    assert charset_for_collation(100000) is None


def test_mysql_latin1_is_cp1252_with_five_c1_controls():
    text = decode_text(bytes(range(256)), "latin1")
    assert len(text) == 256
    assert [text[b] for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)] == [
        "\u0081", "\u008d", "\u008f", "\u0090", "\u009d"]
    assert text[0x80] == "€" and text[0xE9] == "é"
    assert "é€".encode(python_codec("latin1")) == b"\xe9\x80"


@pytest.mark.parametrize("data,charset", [
    (b"\xff", "utf8mb4"),
    (b"\xc3", "utf8mb4"),
    ("😀".encode(), "utf8mb3"),
    (b"\x80", "ascii"),
    (b"\x00\xd8", "utf16le"),
])
def test_invalid_bytes_raise(data, charset):
    with pytest.raises(UnicodeDecodeError):
        decode_text(data, charset)


def test_codec_lookup():
    assert python_codec("binary") is None
    assert python_codec("utf8mb4") == "utf-8"
    assert decode_text("😀".encode(), "utf8mb4") == "😀"
    with pytest.raises(LookupError):
        python_codec("dec8")
    with pytest.raises(ValueError):
        decode_text(b"x", "binary")
