"""The mirror's Arrow path (``mirror/columns.py``) against its reference, the per-value
converters: every batch, random or chosen, gives the same records (or the same error) both
ways; the clean batches go the Arrow way (else the comparison proves nothing)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random

import pyarrow as pa
import pytest

from pipelines.errors import SchemaMismatchError
from pipelines.mirror import columns
from pipelines.mirror.plan import Layout, TableTyping, plan_layout, records
from pipelines.mirror.types import MirrorType, type_of_column, widen
from pipelines.source.model import ColumnSchema, Snapshot, TableSchema

# (data_type, column_type) of every mirror kind, and a value silver would render for it
_COLUMNS = [
    ("bigint", "bigint(20) unsigned"), ("tinyint", "tinyint(4)"), ("int", "int(11)"),
    ("smallint", "smallint(5) unsigned"), ("decimal", "decimal(14,4)"),
    ("decimal", "decimal(65,30)"), ("float", "float"), ("double", "double"),
    ("date", "date"), ("datetime", "datetime(6)"), ("timestamp", "timestamp(3)"),
    ("varchar", "varchar(64)"), ("time", "time(1)"), ("enum", "enum('a','b')"),
    ("blob", "blob"), ("json", "json"), ("bit", "bit(64)"), ("year", "year(4)"),
]


def _value(rnd: random.Random, data_type: str, column_type: str, odd: float):
    """A silver JSON value of the column; with probability ``odd`` one of the forms only the
    reference takes (or refuses)."""
    if rnd.random() < 0.1:
        return None
    weird = rnd.random() < odd
    if data_type in ("bigint", "tinyint", "int", "smallint", "bit", "year"):
        if weird:
            return rnd.choice([2 ** 64 - 1, 300, -129, "7", 1.0, True, 2 ** 63])
        top = {"tinyint": 127, "smallint": 65535, "int": 2 ** 31 - 1, "year": 2155,
               "bit": 2 ** 63 - 1, "bigint": 2 ** 64 - 1}[data_type]
        low = 0 if "unsigned" in column_type or data_type in ("bit", "year") else -top - 1
        return rnd.randint(low, top)
    if data_type == "decimal":
        if weird:
            return rnd.choice(["1.23456", "1e3", 12, "x", "99999999999.9999"])
        scale = 4 if "14" in column_type else 30
        whole = rnd.randint(-10 ** 9, 10 ** 9)
        return f"{whole}.{rnd.randint(0, 10 ** scale - 1):0{scale}d}"
    if data_type in ("float", "double"):
        if weird:
            return rnd.choice(["1.5", 1, 3.4e38])
        return float(repr(rnd.uniform(-1e6, 1e6)))
    if data_type == "date":
        if weird:
            return rnd.choice(["0000-00-00", "2024-00-10", "0000-01-01", "2023-02-29",
                               "2024-01-01 00:00:00", 20240101])
        return (dt.date(1, 1, 1) + dt.timedelta(days=rnd.randint(0, 3_000_000))).isoformat()
    if data_type in ("datetime", "timestamp"):
        if weird:
            return rnd.choice(["0000-00-00 00:00:00", "2024-01-01T10:00:00",
                               "2024-01-01 10:00:00+01:00", "2024-01-01 24:00:00",
                               "2024-01-01", "2024-01-01 10:00:00.1234567"])
        base = dt.datetime(1970, 1, 2) + dt.timedelta(seconds=rnd.randint(0, 2 * 10 ** 9))
        text = base.isoformat(sep=" ")
        digits = rnd.randint(0, 6)
        return text + (f".{rnd.randint(0, 10 ** digits - 1):0{digits}d}" if digits else "")
    if data_type == "blob":
        if weird:
            return rnd.choice(["not base64!", "QUI", 5])
        return base64.b64encode(rnd.randbytes(rnd.randint(0, 40))).decode()
    if data_type == "json":
        return rnd.choice([{"a": [1, 2.5, "x\u00e9"], "b": None}, [1, "2"], "s", 7, 1.25,
                           True, {"n": {"m": []}}])
    if weird:
        return rnd.choice([5, 2.5, {"o": 1}, ["l"], False])
    return "".join(rnd.choice("abc é\u4e2d\"\\\n\t\U0001f600") for _ in range(rnd.randint(0, 12)))


def _typed(cols: list[tuple[str, str, str]]) -> TableTyping:
    """The typing of table db.t with ``cols`` (name, data_type, column_type), key ``id``."""
    schema = [ColumnSchema(n, i + 1, d, c, pk_ordinal=1 if n == "id" else None,
                           is_json=d == "json") for i, (n, d, c) in enumerate(cols)]
    snap = Snapshot("s1", dt.datetime(2024, 1, 1), "default", 1, None, "db", None, None, None,
                    {("db", "t"): TableSchema("db", "t", schema)})
    return TableTyping.from_snapshots([snap], "db", "t")


def _table(rnd: random.Random) -> tuple[list[tuple[str, str, str]], TableTyping, Layout]:
    picked = rnd.sample(_COLUMNS, rnd.randint(1, 6))
    cols = [("id", "bigint", "bigint(20)")] + [(f"c{i}", d, c) for i, (d, c) in
                                               enumerate(picked)]
    typing = _typed(cols)
    layout = plan_layout(None, typing, [])
    if rnd.random() < 0.3:  # a column widened by an earlier epoch's type (types.widen)
        name, t = rnd.choice(layout.columns[1:] or layout.columns)
        wider = widen(t, rnd.choice([MirrorType("bigint", "int"), MirrorType("string", "text"),
                                     MirrorType("decimal(30,8)", "decimal")]))
        layout = Layout(tuple((n, wider if n == name else u) for n, u in layout.columns),
                        layout.key, layout.has_pk)
    return cols, typing, layout


def _batch(rnd: random.Random, cols, rows: int, odd: float, versions=("s1",)) -> pa.RecordBatch:
    out: dict[str, list] = {k: [] for k in ("seq", "gtid", "event_timestamp", "event_type",
                                            "row_before", "row_after", "schema_version",
                                            "absent_columns")}
    for i in range(rows):
        kind = rnd.choice(["INSERT", "UPDATE", "DELETE"])

        def image() -> str:
            img = {n: (i if n == "id" else _value(rnd, d, c, odd)) for n, d, c in cols}
            if rnd.random() < odd / 4:
                img.pop(rnd.choice(list(img)))  # a column left out
            return json.dumps(img, ensure_ascii=False)

        out["seq"].append(i)
        out["gtid"].append(f"0-1-{i}")
        out["event_timestamp"].append(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
        out["event_type"].append(kind)
        out["row_before"].append(image() if kind != "INSERT" else None)
        out["row_after"].append(image() if kind != "DELETE" else None)
        out["schema_version"].append(rnd.choice(versions))
        out["absent_columns"].append(None)
    return pa.RecordBatch.from_pydict(out, schema=pa.schema([
        ("seq", pa.int64()), ("gtid", pa.string()),
        ("event_timestamp", pa.timestamp("us", tz="UTC")), ("event_type", pa.string()),
        ("row_before", pa.string()), ("row_after", pa.string()),
        ("schema_version", pa.string()), ("absent_columns", pa.string())]))


def _both(layout, typing, batch):
    def out(use_arrow: bool):
        try:
            return [b.to_pylist() for b in records(layout, typing, "db.t",
                                                   use_arrow=use_arrow)(iter([batch]))]
        except Exception as exc:  # noqa: BLE001 - compared below
            return (type(exc).__name__, str(exc))

    return out(True), out(False)


def test_random_batches_give_the_references_records() -> None:
    seed = int(os.environ.get("BINLAKE_FUZZ_SEED") or random.randrange(2 ** 31))
    print(f"BINLAKE_FUZZ_SEED={seed}")
    rnd = random.Random(seed)
    took_arrow = 0
    for case in range(150):
        cols, typing, layout = _table(rnd)
        odd = rnd.choice([0.0, 0.0, 0.02, 0.2])
        batch = _batch(rnd, cols, rnd.randint(1, 60), odd, rnd.choice([("s1",), ("s1", None)]))
        fast, reference = _both(layout, typing, batch)
        assert fast == reference, f"seed {seed} case {case}: {cols}"
        took_arrow += _arrow_took(layout, typing, batch)
    assert took_arrow >= 30, f"seed {seed}: only {took_arrow} batches went the Arrow way"


def _arrow_took(layout, typing, batch) -> bool:
    calls = []
    real = columns.image_columns

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(1)
        return out

    from pipelines.mirror import plan

    plan.image_columns = counting
    try:
        list(records(layout, typing, "db.t")(iter([batch])))
    except Exception:  # noqa: BLE001 - the reference's error: not the Arrow way
        return False
    finally:
        plan.image_columns = real
    return bool(calls)


@pytest.mark.parametrize("data_type,column_type,value,arrow", [
    # (the column, a value, whether the Arrow path takes it)
    ("int", "int(11)", 5, True),
    ("int", "int(11)", 1.0, False),  # a fraction: the reference reads it
    ("bigint", "bigint(20) unsigned", 2 ** 64 - 1, True),  # DECIMAL(20,0)
    ("tinyint", "tinyint(4)", 300, False),  # does not fit: the reference's error
    ("decimal", "decimal(14,4)", "-0.5000", True),
    ("decimal", "decimal(14,4)", "1.23456", False),  # more digits than the scale
    ("date", "date", "2024-02-29", True),
    ("date", "date", "0000-00-00", False),  # a zero date: NULL by the reference
    ("date", "date", "0000-01-01", False),  # year 0: Arrow would take it, Python cannot
    ("datetime", "datetime(6)", "2024-01-01 10:00:00.5", True),
    ("datetime", "datetime(6)", "2024-01-01T10:00:00", False),  # not silver's form
    ("timestamp", "timestamp", "2024-01-01 10:00:00", True),
    ("varchar", "varchar(10)", "x\u00e9", True),
    ("varchar", "varchar(10)", 5, False),  # a number in a text column
    ("blob", "blob", "AAE=", True),
    ("blob", "blob", "AAE", False),  # bad padding: the reference's error
    ("json", "json", {"a": [1, 2.5]}, True),  # per value, in the Arrow pass
])
def test_what_the_arrow_path_takes(data_type, column_type, value, arrow) -> None:
    cols = [("id", "bigint", "bigint(20)"), ("v", data_type, column_type)]
    typing = _typed(cols)
    layout = plan_layout(None, typing, [])
    assert layout.type_of("v") == type_of_column(data_type, column_type,
                                                 is_json=data_type == "json")
    text = json.dumps({"id": 1, "v": value})
    batch = pa.RecordBatch.from_pydict({
        "seq": [1], "gtid": [None], "event_timestamp": [None], "event_type": ["INSERT"],
        "row_before": [None], "row_after": [text], "schema_version": ["s1"],
        "absent_columns": [None]}, schema=pa.schema([
            ("seq", pa.int64()), ("gtid", pa.string()),
            ("event_timestamp", pa.timestamp("us", tz="UTC")), ("event_type", pa.string()),
            ("row_before", pa.string()), ("row_after", pa.string()),
            ("schema_version", pa.string()), ("absent_columns", pa.string())]))
    fast, reference = _both(layout, typing, batch)
    assert fast == reference
    assert _arrow_took(layout, typing, batch) is arrow


def test_a_value_that_does_not_fit_names_the_seq_and_column() -> None:
    cols = [("id", "bigint", "bigint(20)"), ("v", "tinyint", "tinyint(4)")]
    typing = _typed(cols)
    layout = plan_layout(None, typing, [])
    batch = _batch(random.Random(0), [("id", "bigint", "bigint(20)")], 3, 0.0)
    rows = batch.to_pylist()
    rows[1]["row_after"] = json.dumps({"id": 1, "v": "x"})
    rows[1]["row_before"] = rows[1]["row_before"] or json.dumps({"id": 1, "v": 1})
    bad = pa.RecordBatch.from_pylist(rows, schema=batch.schema)
    with pytest.raises(SchemaMismatchError, match=r"db\.t seq 1: column v"):
        list(records(layout, typing, "db.t")(iter([bad])))
