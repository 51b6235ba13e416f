"""Pure silver transforms: value rendering (docs/types.md), images, pk_values, naming epochs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pyarrow as pa
import pytest

from pipelines.binlog import coltypes as T
from pipelines.errors import SchemaMismatchError
from pipelines.silver.images import TableRenderer
from pipelines.silver.naming import BronzeTableMap, NamingPlan, TableSpec, position_key
from pipelines.silver.render import ColumnSpec, make_renderer, pk_text


@pytest.mark.parametrize("spec, value, expected", [
    (ColumnSpec("i", T.LONGLONG), b"-9223372036854775808", "-9223372036854775808"),
    (ColumnSpec("u", T.LONGLONG), b"18446744073709551615", "18446744073709551615"),
    # signedness not logged (MINIMAL): bronze holds the signed reading, the snapshot says UNSIGNED
    (ColumnSpec("u", T.LONGLONG, fix_unsigned=True), b"-1", "18446744073709551615"),
    (ColumnSpec("u", T.TINY, fix_unsigned=True), b"-128", "128"),
    (ColumnSpec("u", T.INT24, fix_unsigned=True), b"5", "5"),
    (ColumnSpec("d", T.NEWDECIMAL, 10 << 8 | 2), b"-0.50", '"-0.50"'),
    (ColumnSpec("f", T.FLOAT, 4), b"3.4028235e+38", "3.4028235e+38"),
    (ColumnSpec("f", T.DOUBLE, 8), b"0.1", "0.1"),
    (ColumnSpec("b", T.BIT, 64), b"18446744073709551615", "18446744073709551615"),
    (ColumnSpec("y", T.YEAR), b"0", "0"),
    (ColumnSpec("t", T.TIME2, 6), b"-838:59:59.000000", '"-838:59:59.000000"'),
    (ColumnSpec("ts", T.TIMESTAMP2, 3), b"0000-00-00 00:00:00.000", '"0000-00-00 00:00:00.000"'),
    (ColumnSpec("e", T.ENUM, 1, enum_values=("small", "médium")), b"2", '"médium"'),
    (ColumnSpec("e", T.ENUM, 1, enum_values=("a",)), b"0", '""'),
    (ColumnSpec("s", T.SET, 1, set_values=("a", "b", "c")), b"5", '"a,c"'),
    (ColumnSpec("s", T.SET, 1, set_values=("a", "b")), b"0", '""'),
    (ColumnSpec("v", T.VARCHAR, 40, charset="utf8mb4"), "Zoë 😀 \"q\"".encode(), '"Zoë 😀 \\"q\\""'),
    # MySQL latin1 is cp1252 with 0x81 etc. mapped to C1 controls
    (ColumnSpec("v", T.VARCHAR, 40, charset="latin1"), b"\xc9t\xe9 \x80", '"Été €"'),
    (ColumnSpec("b", T.BLOB, 2, charset="binary"), b"\x00\xff", '"AP8="'),
    # BINARY(4): the row image drops trailing 0x00, silver restores them
    (ColumnSpec("b", T.STRING, 4, charset="binary", pad_binary=4), b"\x00\x01", '"AAEAAA=="'),
    (ColumnSpec("j", T.JSON, 4), b'{"a": 18446744073709551615, "d": 1.50}',
     '{"a": 18446744073709551615, "d": 1.50}'),
    # MariaDB JSON (LONGTEXT + json_valid) embedded as is, numbers exact
    (ColumnSpec("j", T.BLOB, 4, charset="utf8mb4", is_json=True), b'{"amount": 12.50}',
     '{"amount": 12.50}'),
    (ColumnSpec("g", T.GEOMETRY, 4), b"\x00\x00\x00\x00\x01", '"AAAAAAE="'),
])
def test_render(spec: ColumnSpec, value: bytes, expected: str) -> None:
    assert make_renderer(spec)(value) == expected
    json.loads(expected)  # always valid JSON


@pytest.mark.parametrize("spec, value, reason", [
    (ColumnSpec("e", T.ENUM, 1, enum_values=("a",)), b"3", "ENUM index 3"),
    (ColumnSpec("s", T.SET, 1, set_values=("a",)), b"6", "SET bits"),
    (ColumnSpec("v", T.VARCHAR, 40, charset="utf8mb4"), b"\xff\xfe", "not valid utf8mb4"),
])
def test_unrenderable_values_are_quarantine_reasons(spec, value, reason) -> None:
    with pytest.raises(SchemaMismatchError, match=reason):
        make_renderer(spec)(value)


def test_unknown_labels_or_charset_refuse_at_build() -> None:
    with pytest.raises(SchemaMismatchError, match="ENUM labels unknown"):
        make_renderer(ColumnSpec("e", T.ENUM, 1))
    with pytest.raises(SchemaMismatchError, match="character set unknown"):
        make_renderer(ColumnSpec("v", T.VARCHAR, 10))


@pytest.mark.parametrize("json_value, text", [
    ('"a|b\\\\c"', "a\\|b\\\\c"), ("42", "42"), ('"AP8="', "AP8="), ('"-0.50"', "-0.50"),
])
def test_pk_text(json_value: str, text: str) -> None:
    assert pk_text(json_value) == text


def _spec(**kw) -> TableSpec:
    cols = (ColumnSpec("b", T.VARCHAR, 20, charset="utf8mb4"), ColumnSpec("a", T.LONG),
            ColumnSpec("v", T.VARCHAR, 20, charset="utf8mb4"))
    return TableSpec(cols, kw.get("pk", (0, 1)), kw.get("kind", "primary_key"), "snap-1")


def _one(tr: TableRenderer, event_type, before, after, before_present, after_present):
    """Render one row change with the columnar renderer; its fields as a namespace."""
    images = tr.render(pa.array([event_type]), pa.array([before], pa.list_(pa.binary())),
                       pa.array([after], pa.list_(pa.binary())),
                       pa.array([before_present], pa.list_(pa.bool_())),
                       pa.array([after_present], pa.list_(pa.bool_())))
    assert not images.errors
    return SimpleNamespace(**{f: getattr(images, f)[0].as_py() for f in (
        "row_before", "row_after", "changed_columns", "pk_values", "absent_columns")})


def test_images_changed_columns_and_pk() -> None:
    tr = TableRenderer(_spec())
    img = _one(tr, "UPDATE", [b"x|y", b"1", b"old"], [b"x|y", b"2", b"old"], None, None)
    assert img.row_before == '{"b": "x|y", "a": 1, "v": "old"}'
    assert img.row_after == '{"b": "x|y", "a": 2, "v": "old"}'
    assert img.changed_columns == '["a"]'
    assert img.pk_values == "x\\|y|1"  # from the before image, table ordinal order
    ins = _one(tr, "INSERT", None, [b"k", b"7", None], None, None)
    assert (ins.row_before, ins.changed_columns, ins.pk_values) == (None, None, "k|7")
    assert ins.row_after == '{"b": "k", "a": 7, "v": null}'


def test_absent_columns_are_left_out_not_null() -> None:
    tr = TableRenderer(_spec())
    img = _one(tr, "UPDATE", [b"k", b"1", None], [b"k", None, b"new"],
               [True, True, False], [True, False, True])
    assert img.row_before == '{"b": "k", "a": 1}' and img.row_after == '{"b": "k", "v": "new"}'
    assert json.loads(img.absent_columns) == ["a", "v"]
    assert img.changed_columns == "[]"


def _snap(sid: str, file: str, pos: int, ncols: int = 2):
    col = lambda i: SimpleNamespace(name=f"c{i}", charset="utf8mb4", data_type="int",  # noqa: E731
                                    is_json=False, unsigned=False, enum_values=None,
                                    set_values=None, pk_ordinal=1 if i == 0 else None)
    table = SimpleNamespace(columns=[col(i) for i in range(ncols)])
    return SimpleNamespace(snapshot_id=sid, source_id="s", binlog_file=file, binlog_pos=pos,
                           tables={("db", "t"): table})


def test_naming_epochs_pick_the_snapshot_inside_the_epoch() -> None:
    ddl = [("s", "bin.000001", 500, "db", "ALTER TABLE t ADD COLUMN c2 int")]
    before = _snap("before", "bin.000001", 300, ncols=2)
    after = _snap("after", "bin.000002", 100, ncols=3)
    plan = NamingPlan.build(ddl, [before, after])
    tm2 = BronzeTableMap((T.LONG, T.LONG), (0, 0))
    tm3 = BronzeTableMap((T.LONG, T.LONG, T.LONG), (0, 0, 0))
    assert plan.resolve("s", "db", "t", "bin.000001", 400, tm2).schema_version == "before"
    assert plan.resolve("s", "db", "t", "bin.000002", 50, tm3).schema_version == "after"
    # The same row shape after the ALTER with only the pre-ALTER snapshot: refused, not guessed.
    plan_old_only = NamingPlan.build(ddl, [before])
    with pytest.raises(SchemaMismatchError, match="no schema"):
        plan_old_only.resolve("s", "db", "t", "bin.000001", 900, tm3)
    # A count that disagrees with the epoch's snapshot is a reason too.
    with pytest.raises(SchemaMismatchError, match="column count 3"):
        plan.resolve("s", "db", "t", "bin.000001", 400, tm3)
    assert position_key("bin.000002", 7) == (2 << 32) | 7


def test_binlog_names_are_cross_checked() -> None:
    plan = NamingPlan.build([], [_snap("s1", "bin.000009", 4)])
    named = BronzeTableMap((T.LONG, T.LONG), (0, 0), column_names=("c0", "c1"))
    assert plan.resolve("s", "db", "t", "bin.000001", 4, named).schema_version == "s1"
    wrong = BronzeTableMap((T.LONG, T.LONG), (0, 0), column_names=("c0", "other"))
    with pytest.raises(SchemaMismatchError, match="differ from snapshot"):
        plan.resolve("s", "db", "t", "bin.000001", 4, wrong)
    # FULL metadata and no snapshot at all: the binlog's own names.
    spec = NamingPlan.build([], []).resolve("s", "db", "x", "bin.000001", 4, named)
    assert spec.schema_version == "binlog" and spec.pk_kind == "all_columns"
