"""Plain ``string`` types in every table's schema (pipelines/lake/plain_strings.py): Spark 4.2's
Connect server would write the strings a client's plan declares (``mapInArrow``'s schema) as
``string collate UTF8_BINARY``, which Sail, delta-rs and older Spark cannot read; the lake's
writes cast the declared string columns by their SQL type where the engine does that, and
leave every other engine's plan alone."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pipelines.lake import plain_strings as ps
from pipelines.lake.sql_types import parse_columns
from pipelines.lake.tables import BRONZE_EVENTS, Lake, LakeTable

# Not registered: the registry is the lake's (docs/lake.md lists it).
TABLE = LakeTable("test", "plain_strings", parse_columns(
    "id bigint, s string, tags array<string>, nested array<array<string>>, n int"))


class _Column:
    def __init__(self, name: str) -> None:
        self.name = name

    def cast(self, kind: str) -> tuple[str, str, str]:
        return ("cast", self.name, kind)


class _Frame:
    """The little of a DataFrame :func:`plain_strings` uses."""

    sparkSession = object()

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.replaced: dict | None = None

    def __getitem__(self, name: str) -> _Column:
        return _Column(name.strip("`"))

    def withColumns(self, cols: dict) -> "_Frame":
        out = _Frame(self.columns)
        out.replaced = cols
        return out


def test_declared_string_columns_are_cast_by_their_sql_type() -> None:
    assert ps.string_casts(["id", "s", "tags", "nested", "n", "extra"], TABLE.columns) == {
        "s": "string", "tags": "array<string>", "nested": "array<array<string>>"}
    bronze = ps.string_casts(BRONZE_EVENTS.column_names, BRONZE_EVENTS.columns)
    assert bronze["enum_values"] == "array<array<string>>"
    assert "row_before" not in bronze and "column_types" not in bronze
    assert ps.is_collated("string collate UTF8_BINARY")
    assert ps.is_collated("array<string collate UTF8_BINARY>")
    assert not ps.is_collated("string") and not ps.is_collated("array<string>")


def test_only_an_engine_collating_sent_strings_gets_the_casts(monkeypatch) -> None:
    df = _Frame(["id", "s", "tags", "n"])
    monkeypatch.setattr(ps, "collates_sent_strings", lambda spark: False)
    assert ps.plain_strings(df, TABLE.columns) is df
    monkeypatch.setattr(ps, "collates_sent_strings", lambda spark: True)
    out = ps.plain_strings(df, TABLE.columns)
    assert out.replaced == {"s": ("cast", "s", "string"),
                            "tags": ("cast", "tags", "array<string>")}
    assert ps.plain_strings(_Frame(["id", "n"]), TABLE.columns).replaced is None


def test_sail_collates_nothing_and_its_plans_stay_as_they_are(spark) -> None:
    assert ps.collates_sent_strings(spark) is False
    df = spark.range(1).selectExpr("id", "'x' AS s")
    assert ps.plain_strings(df, TABLE.columns) is df


def _schema_types(table: Path) -> list[str]:
    """Every field type of the table's latest schema in its Delta log, as JSON text."""
    meta = [json.loads(line)["metaData"] for f in sorted((table / "_delta_log").glob("*.json"))
            for line in f.read_text().splitlines() if '"metaData"' in line]
    return [json.dumps(f["type"]) for f in json.loads(meta[-1]["schemaString"])["fields"]]


@pytest.mark.spark
def test_a_mapinarrow_table_written_over_connect_has_plain_strings(delta_spark, spark,
                                                                   tmp_path: Path) -> None:
    schema = TABLE.arrow_schema()

    def rows(batches):
        for _ in batches:
            yield pa.RecordBatch.from_pydict(
                {"id": [1], "s": ["a"], "tags": [["b"]], "nested": [[["c"]]], "n": [2]},
                schema=schema)

    lake = Lake(str(tmp_path / "lake"))
    decoded = delta_spark.range(1).mapInArrow(rows, TABLE.ddl())
    lake.append(decoded, TABLE)
    lake.append(lake.read(delta_spark, TABLE).where("n = 2"), TABLE)
    types = _schema_types(tmp_path / "lake" / "test" / "plain_strings")
    assert not any(ps.is_collated(t) for t in types), types
    assert DeltaTable(lake.path(TABLE)).to_pyarrow_table().num_rows == 2
    back = spark.read.format("delta").load(lake.path(TABLE)).collect()
    assert [(r["s"], r["tags"], r["nested"]) for r in back] == [("a", ["b"], [["c"]])] * 2
