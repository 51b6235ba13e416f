"""``delta_ops.current_version`` at a local path reads the ``_delta_log`` listing, not the
snapshot: the same version delta-rs loads, past checkpoints and log cleanup, and ``None``
where there is no table (real Delta tables written by the embedded engine)."""

from __future__ import annotations

import os

import deltalake
import pytest

from pipelines.lake.delta_ops import current_version


def _append(spark, path: str, n: int) -> None:
    spark.createDataFrame([(n,)], "n bigint").write.format("delta").mode("append").save(path)


def test_the_listing_gives_delta_rs_version(spark, tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "t")
    assert current_version(path) is None  # no directory
    os.makedirs(os.path.join(path, "_delta_log"))
    assert current_version(path) is None  # a creation killed before its first commit
    for n in range(12):  # versions 0..11, a checkpoint at 10
        _append(spark, path, n)
    assert os.path.exists(os.path.join(path, "_delta_log", "_last_checkpoint"))
    want = deltalake.DeltaTable(path).version()
    assert want == 11

    def no_load(*a, **k):
        raise AssertionError("delta-rs loaded the table")

    monkeypatch.setattr(deltalake, "DeltaTable", no_load)
    assert current_version(path) == want
    # the commits before the checkpoint cleaned up (as log retention does): still 11
    for v in range(10):
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    assert current_version(path) == 11
    for v in (11,):  # only the checkpoint of version 10 and no commit after it
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    assert current_version(path) == 10


@pytest.mark.parametrize("names,want", [
    (["00000000000000000000.json", "00000000000000000001.json", "_last_checkpoint"], 1),
    (["00000000000000000010.checkpoint.parquet", "00000000000000000011.crc"], 10),
    (["00000000000000000003.json", "00000000000000000004.json.3f2a.tmp", ".s.json.crc"], 3),
    (["_last_checkpoint", "00000000000000000000.00000000000000000009.compacted.json"], None),
])
def test_what_a_listing_names(names, want) -> None:
    from pipelines.lake.delta_ops import _newest_listed

    assert _newest_listed(names) == want
