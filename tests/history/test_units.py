"""Pure pieces of the history commands: times, GTID sets, positions, raw JSON values, SQL
literals (no engine, no server)."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.binlog import coltypes as T
from pipelines.errors import ConfigError
from pipelines.history.images import quote_text, sql_literal
from pipelines.history.selection import parse_table, parse_where
from pipelines.history.times import parse_gtid_set, parse_position, parse_time
from pipelines.silver.image_values import pk_values_of, raw_values
from pipelines.silver.render import ColumnSpec


@pytest.mark.parametrize("text, expected", [
    ("2026-11-23 10:00:00", dt.datetime(2026, 11, 23, 10)),
    ("2026-11-23 10:00:00.25", dt.datetime(2026, 11, 23, 10, 0, 0, 250000)),
    ("2026-11-23T10:00:00+01:00", dt.datetime(2026, 11, 23, 9)),
    ("2026-11-23T10:00:00.000001Z", dt.datetime(2026, 11, 23, 10, 0, 0, 1)),
    ("2026-11-23T01:30:00-05:30", dt.datetime(2026, 11, 23, 7)),
    ("2026-11-23", dt.datetime(2026, 11, 23)),
])
def test_times_are_utc(text, expected) -> None:
    assert parse_time(text, "--at") == expected


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01 00:00:00", "10:00", ""])
def test_bad_time_names_the_flag(text) -> None:
    with pytest.raises(ConfigError, match="--since"):
        parse_time(text, "--since")


def test_gtid_sets() -> None:
    g = parse_gtid_set("0-1-5, 0-1-9")
    assert g.contains("0-1-5") and g.contains("0-1-9") and not g.contains("0-1-6")
    u = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    m = parse_gtid_set(f"{u}:1-5:9")
    assert m.contains(f"{u.lower()}:3") and m.contains(f"{u.lower()}:9")
    assert not m.contains(f"{u.lower()}:6") and not m.contains("0-1-5")
    assert "BETWEEN 1 AND 5" in m.sql_predicate() and "'0-1-5'" in g.sql_predicate()
    for bad in ("abc", "0-1", f"{u}:5-1", ""):
        with pytest.raises(ConfigError):
            parse_gtid_set(bad)


def test_positions() -> None:
    assert parse_position("mysql-bin.000042:1234") == ("mysql-bin.000042", 1234, 42 << 32 | 1234)
    for bad in ("mysql-bin.000042", "mysql-bin:12", ":12", "f.1:x"):
        with pytest.raises(ConfigError, match="--pos"):
            parse_position(bad)


def test_raw_values_keep_each_values_text() -> None:
    image = '{"a": 1, "b": {"x": 1.50, "y": [1, 2.0]}, "c": "x\\"y", "d": null, "e": -0.0}'
    assert raw_values(image) == {"a": "1", "b": '{"x": 1.50, "y": [1, 2.0]}', "c": '"x\\"y"',
                                 "d": "null", "e": "-0.0"}
    assert raw_values("{}") == {} and raw_values(None) is None
    with pytest.raises(ValueError):
        raw_values("[1]")


def test_sql_literals_read_back_exactly() -> None:
    assert sql_literal(ColumnSpec("d", T.NEWDECIMAL), '"-0.50"') == "'-0.50'"
    # BINARY(4) keeps its trailing zero bytes (silver padded them back).
    assert sql_literal(ColumnSpec("b", T.STRING, charset="binary", pad_binary=4),
                       '"YQAAAA=="') == "X'61000000'"
    assert sql_literal(ColumnSpec("b", T.BLOB, charset="binary"), '""') == "''"
    assert sql_literal(ColumnSpec("bit", T.BIT), "18446744073709551615") == "18446744073709551615"
    assert sql_literal(ColumnSpec("e", T.ENUM, enum_values=("a",)), '"a"') == "'a'"
    assert sql_literal(ColumnSpec("s", T.SET, set_values=("a", "b")), '"a,b"') == "'a,b'"
    assert sql_literal(ColumnSpec("t", T.TIME2), '"-838:59:59.000000"') == "'-838:59:59.000000'"
    assert sql_literal(ColumnSpec("j", T.JSON), '{"k": 1.50}') == \
        "CAST('{\"k\": 1.50}' AS JSON)"
    # MariaDB JSON is LONGTEXT: its exact text, spacing included.
    assert sql_literal(ColumnSpec("j", T.BLOB, charset="utf8mb4", is_json=True),
                       '{"k":  1.50}') == "'{\"k\":  1.50}'"
    assert sql_literal(ColumnSpec("f", T.FLOAT), "1.1", compare=True) == "CAST(1.1 AS FLOAT)"
    assert sql_literal(ColumnSpec("f", T.FLOAT), "1.1") == "1.1"
    assert sql_literal(ColumnSpec("v", T.VARCHAR, charset="latin1"), '"café"') == "'café'"
    assert sql_literal(ColumnSpec("v", T.VARCHAR, charset="utf8mb4"), "null") == "NULL"
    assert quote_text("a'b\\c\0d\ne\x1a") == "'a\\'b\\\\c\\0d\\ne\\Z'"


def test_pk_values_like_silver() -> None:
    assert pk_values_of({"a": '"x|y"', "b": "2", "c": '"back\\\\"'}, ["a", "b", "c"]) == \
        "x\\|y|2|back\\\\"


def test_selection_parsing() -> None:
    assert parse_table("shop.orders") == ("shop", "orders")
    assert parse_table("`my.db`.`t``x`") == ("my.db", "t`x")
    assert parse_where("status=paid") == ("status", "paid")
    assert parse_where("note='a=b'") == ("note", "a=b")
    assert parse_where("note=NULL") == ("note", None)
    for bad in ("orders", "a.b.c"):
        with pytest.raises(ConfigError, match="--table"):
            parse_table(bad)
    with pytest.raises(ConfigError, match="--where"):
        parse_where("status")
