"""Every stage makes its own ``Lake``; what one saw of a table at a local path (it exists, it
holds every declared column) serves the others of the process (pipelines/lake/seen.py) until
the table's ``_delta_log`` changes. Sail, real tables; the engine's answers are counted by
wrapping the two functions ``Lake`` asks them through."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import pipelines.lake.tables as lake_mod
from pipelines.lake import seen as lake_seen
from pipelines.lake.tables import Lake, LakeTable

pytestmark = [pytest.mark.spark]

OLD = "id bigint, p string"
TABLE = LakeTable("t", "seen", (("id", "bigint"), ("p", "string"), ("note", "string")), ())


@pytest.fixture
def asks(monkeypatch):
    """The engine's answers ``Lake`` asked for: ``exists`` and ``columns`` (a schema read)."""
    got = {"exists": 0, "columns": 0}
    exists, columns = lake_mod.table_exists, lake_mod.with_declared_columns

    def counted_exists(spark, path):
        got["exists"] += 1
        return exists(spark, path)

    def counted_columns(df, table):
        got["columns"] += 1
        return columns(df, table)

    monkeypatch.setattr(lake_mod, "table_exists", counted_exists)
    monkeypatch.setattr(lake_mod, "with_declared_columns", counted_columns)
    lake_seen.forget_all()
    yield got
    lake_seen.forget_all()


def _current(spark, root: Path) -> None:
    spark.createDataFrame([(1, "x", "a")], TABLE.ddl()).write.format("delta") \
        .save(Lake(str(root)).path(TABLE))


def test_a_second_lake_object_asks_the_engine_nothing_more(spark, tmp_path, asks) -> None:
    _current(spark, tmp_path)
    first = Lake(str(tmp_path))
    assert first.exists(spark, TABLE) and first.read(spark, TABLE).count() == 1
    assert asks == {"exists": 1, "columns": 1}
    second = Lake(str(tmp_path))  # the next stage's
    assert second.exists(spark, TABLE) and second.read(spark, TABLE).count() == 1
    assert asks == {"exists": 1, "columns": 1}


def test_a_missing_table_needs_no_query(spark, tmp_path, asks) -> None:
    lake = Lake(str(tmp_path))
    assert not lake.exists(spark, TABLE)
    (tmp_path / "t" / "seen").mkdir(parents=True)  # a directory, no Delta log
    assert not lake.exists(spark, TABLE)
    assert asks["exists"] == 0


def test_a_write_keeps_a_complete_table_complete(spark, tmp_path, asks) -> None:
    _current(spark, tmp_path)
    lake = Lake(str(tmp_path))
    lake.append(spark.createDataFrame([(2, "y", "b")], TABLE.ddl()), TABLE)
    assert asks == {"exists": 1, "columns": 0}  # completeness asked by a schema only
    assert Lake(str(tmp_path)).read(spark, TABLE).count() == 2
    assert asks == {"exists": 1, "columns": 0}


def test_another_commit_makes_the_next_lake_ask_again(spark, tmp_path, asks) -> None:
    _current(spark, tmp_path)
    assert Lake(str(tmp_path)).read(spark, TABLE).count() == 1
    spark.createDataFrame([(2, "y", "b")], TABLE.ddl()).write.format("delta").mode("append") \
        .save(Lake(str(tmp_path)).path(TABLE))  # another writer's commit
    assert Lake(str(tmp_path)).read(spark, TABLE).count() == 2
    assert asks["columns"] == 2


def test_a_table_made_again_in_an_older_layout_is_not_taken_for_the_one_seen(
        spark, tmp_path, asks) -> None:
    """The same path, deleted and written again by an older binlake (no ``note`` column):
    ext4 gives the new ``_delta_log`` the old one's inode. Reads give ``note`` as NULL and
    the next append adds it, as for any older table."""
    _current(spark, tmp_path)
    lake = Lake(str(tmp_path))
    assert lake.read(spark, TABLE).count() == 1
    shutil.rmtree(lake.path(TABLE))
    spark.createDataFrame([(5, "z")], OLD).write.format("delta").save(lake.path(TABLE))
    again = Lake(str(tmp_path))
    assert [tuple(r) for r in again.read(spark, TABLE).select(*TABLE.column_names).collect()] \
        == [(5, "z", None)]
    again.append(spark.createDataFrame([(6, "z", "c")], TABLE.ddl()), TABLE)
    raw = spark.read.format("delta").load(lake.path(TABLE))
    assert sorted(tuple(r) for r in raw.select(*TABLE.column_names).collect()) \
        == [(5, "z", None), (6, "z", "c")]


def test_a_commit_while_the_engine_is_asked_makes_the_next_lake_ask_again(
        spark, tmp_path, monkeypatch) -> None:
    """The log's state is taken before the question: a commit landing while the engine
    answers is not taken for part of what it saw."""
    _current(spark, tmp_path)
    path = Lake(str(tmp_path)).path(TABLE)
    asked = []
    exists = lake_mod.table_exists

    def committing(session, where):
        asked.append(where)
        answer = exists(session, where)
        if len(asked) == 1:  # another writer's commit lands meanwhile
            session.createDataFrame([(2, "y", "b")], TABLE.ddl()).write.format("delta") \
                .mode("append").save(where)
        return answer

    monkeypatch.setattr(lake_mod, "table_exists", committing)
    lake_seen.forget_all()
    assert Lake(str(tmp_path)).exists(spark, TABLE)
    assert Lake(str(tmp_path)).exists(spark, TABLE)
    assert asked == [path, path]
    lake_seen.forget_all()
