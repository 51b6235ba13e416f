"""``errors.raised_in_task``: a binlake error raised in an engine task, given back from the
engine's exception text. Table-driven texts, and silver's ``LakeChangedError`` on Apache Spark
with delta-spark, classic and over Spark Connect (on the embedded engine, with the command's
message: ``tests/silver/test_slices.py``)."""

from __future__ import annotations

import pytest

from pipelines.errors import (LakeChangedError, LakeFaultError, SchemaMismatchError,
                              raised_in_task)
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture (getfixturevalue)

_TRACE = ("An exception was thrown from the Python worker. Please see the stack trace below.\n"
          "Traceback (most recent call last):\n"
          '  File "/work/pipelines/silver/transform.py", line 76, in on_day\n'
          "    raise LakeChangedError(\n")


@pytest.mark.parametrize("text, want", [
    (_TRACE + "pipelines.errors.LakeChangedError: silver: f.1 at 4: run silver again\n",
     LakeChangedError("silver: f.1 at 4: run silver again")),
    # the innermost of two (a chained traceback prints the cause first)
    (_TRACE + "pipelines.errors.LakeFaultError: first\n\nDuring handling ...\n"
     "pipelines.errors.SchemaMismatchError: second\n", SchemaMismatchError("second")),
    ("pipelines.errors.LakeFaultError: a file is missing\n", LakeFaultError("a file is missing")),
    # not binlake's: a Python error, an unknown name, a DecodeError (its fields are not text)
    (_TRACE + "ValueError: bad\n", None),
    (_TRACE + "pipelines.errors.NoSuchError: x\n", None),
    (_TRACE + "pipelines.errors.DecodeError: f.1 at 4: truncated\n", None),
    ("[TABLE_OR_VIEW_NOT_FOUND] The table or view `x` cannot be found.", None),
])
def test_raised_in_task(text, want):
    got = raised_in_task(RuntimeError(text))
    if want is None:
        assert got is None
    else:
        assert type(got) is type(want) and str(got) == str(want)


@pytest.mark.jvm
# Connect first: the classic session (module-scoped) turns pyspark's functions classic while
# it lives, and the embedded engine's bronze step needs them as Connect ones.
@pytest.mark.parametrize("session", ["delta_spark", "jvm_spark"])
def test_a_task_error_on_jvm_spark_comes_back_as_itself(spark, tmp_path, request,
                                                        session) -> None:
    """The same on Apache Spark with delta-spark, in process (``jvm_spark``, local[2]) and
    through its Spark Connect server (``delta_spark``); the rendering task runs in a Python
    worker process: silver's rows written for a day they are not of stop the append with
    ``LakeChangedError``, and nothing is written. Bronze is indexed by the embedded engine
    into the same path lake, as silver's own runs read it."""
    import datetime as dt

    from pipelines.bronze.table_maps import read_table_maps
    from pipelines.history.lake import naming_plan
    from pipelines.lake.tables import BRONZE_EVENTS, SILVER_EVENTS, Lake
    from pipelines.silver.transform import to_silver
    from tests.support.lake_runs import bronze_of_sample

    cfg = bronze_of_sample(spark, tmp_path, "mariadb-bin.000003")
    lake = Lake.of(cfg)
    plan = naming_plan(spark, cfg)
    plan.table_maps = read_table_maps(spark, lake)  # as run_silver names the rows
    jvm = request.getfixturevalue(session)  # after the embedded engine's part
    bronze = lake.read(jvm, BRONZE_EVENTS)
    assert to_silver(bronze, plan, compiled=False).count() == 295  # as mariadb-binlog -v
    rows = to_silver(bronze, plan, compiled=False, day=dt.date(1970, 1, 1))
    with pytest.raises(LakeChangedError, match="not 1970-01-01 as bronze said.*run silver "
                       "again"):
        lake.append(rows, SILVER_EVENTS)
    assert not lake.exists(jvm, SILVER_EVENTS) or lake.read(jvm, SILVER_EVENTS).count() == 0
