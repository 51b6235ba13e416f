"""``silver/progress`` is appended to, a row per file a silver run took: the reader keeps each
file's latest row, so a file bronze indexed again is taken once, and the table stays in a
few data files however many runs append to it (real Delta tables, the embedded engine)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from deltalake import DeltaTable

from pipelines.bronze.files import load_states, save_states
from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.lake.few_files import FEW_FILES
from pipelines.lake.tables import SILVER_PROGRESS, Lake
from pipelines.silver.job import run_silver
from pipelines.silver.progress import load_progress, save_progress

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"


def test_a_file_indexed_again_is_taken_once(spark, tmp_path: Path) -> None:
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    names = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))[:2]
    for name in names:
        shutil.copy(SAMPLES / name, binlogs / name)
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    lake = Lake.of(cfg)
    run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
    assert sorted(f for _, f in run_silver(spark, cfg).files) == names
    assert run_silver(spark, cfg).files == []  # nothing new: nothing taken, nothing written
    first = load_progress(spark, lake)[("default", names[0])]

    st = load_states(spark, lake)[("default", names[0])]
    st.status, st.updated_at, st.size = "in_progress", None, 0  # forces a re-index
    save_states(spark, lake, [st])
    run_bronze(spark, cfg, binlog_dir=str(binlogs), files=[names[0]])
    indexed = load_states(spark, lake)[("default", names[0])].updated_at
    assert indexed != first["bronze_updated_at"]
    assert run_silver(spark, cfg).files == [("default", names[0])]
    # Two rows of the file now; the later one counts, so the next run takes nothing.
    rows = lake.read(spark, SILVER_PROGRESS).where(f"binlog_file = '{names[0]}'").collect()
    assert len(rows) == 2
    assert load_progress(spark, lake)[("default", names[0])]["bronze_updated_at"] == indexed
    assert run_silver(spark, cfg).files == []


def test_many_runs_keep_few_files(spark, tmp_path: Path) -> None:
    lake = Lake.of(load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")}))
    base = dt.datetime(2026, 1, 1)
    for i in range(FEW_FILES + 4):
        save_progress(spark, lake, [("default", f"mariadb-bin.{i % 3:06d}",
                                     base + dt.timedelta(minutes=i), [[4, "shop", f"q{i}"]],
                                     f"{i}:digest")])
    save_progress(spark, lake, [])  # a run that took no file writes nothing
    assert len(DeltaTable(lake.path(SILVER_PROGRESS)).file_uris()) <= FEW_FILES
    got = load_progress(spark, lake)
    assert sorted(got) == [("default", f"mariadb-bin.{n:06d}") for n in range(3)]
    last = FEW_FILES + 3
    for n in range(3):  # each file's latest save
        i = max(j for j in range(last + 1) if j % 3 == n)
        row = got[("default", f"mariadb-bin.{n:06d}")]
        assert row["bronze_updated_at"] == base + dt.timedelta(minutes=i)
        assert row["ddl"] == f'[[4, "shop", "q{i}"]]'
        assert row["derived_with"] == f"{i}:digest"
