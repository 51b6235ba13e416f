"""``pipelines/lake/few_files.py`` on JVM Spark with delta-spark: the engine's own ``OPTIMIZE``
compacts a small table past its bound (delta-rs only where the engine has none)."""

from __future__ import annotations

from collections import Counter

from deltalake import DeltaTable

from pipelines.bronze.files import FileState, load_states, save_states
from pipelines.lake.few_files import keep_few_files
from pipelines.lake.tables import BRONZE_FILES, Lake
from tests.support.jvm_spark import jvm_spark  # noqa: F401 - fixture


def test_jvm_spark_compacts_with_its_optimize(jvm_spark, tmp_path) -> None:  # noqa: F811
    lake = Lake(str(tmp_path / "lake"))
    path = lake.path(BRONZE_FILES)
    for n in range(3):
        save_states(jvm_spark, lake, [FileState("src", f"bin.{i:06d}", f"/b/bin.{i:06d}",
                                                10 * n + i, "partial", last_pos=n)
                                      for i in range(2)])
    rows = Counter(repr(tuple(r)) for r in jvm_spark.read.format("delta").load(path).collect())
    states = load_states(jvm_spark, lake)
    # 3 commits of 2 rows, local[2] cuts each commit's 2 rows into 2 partitions: 2 files each
    assert len(DeltaTable(path).file_uris()) == 6

    assert keep_few_files(jvm_spark, lake, BRONZE_FILES, most=2) == 6  # the files it held then

    assert len(DeltaTable(path).file_uris()) == 1
    commit = DeltaTable(path).history(1)[0]
    assert commit["operation"] == "OPTIMIZE" and "Delta-Lake" in commit["engineInfo"], commit
    assert Counter(repr(tuple(r)) for r in jvm_spark.read.format("delta").load(path)
                   .collect()) == rows
    assert load_states(jvm_spark, lake) == states
