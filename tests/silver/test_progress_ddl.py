"""Silver remembers each bronze file's QUERY events in ``silver/progress`` (issue 13, goal 7):
a run reads bronze's QUERY events only for files that are new or that bronze rewrote, so a
small file after a long history does not scan the history's event types.

The shipped sample binlogs (a real MariaDB's, with CREATE/ALTER statements) are indexed in two
steps on the embedded engine; in between, the first files' QUERY rows are removed from bronze
behind silver's back. The second run still names with them (they come from progress), and a
re-indexed file's QUERY events are read again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.lake.tables import BRONZE_EVENTS, Lake
from pipelines.silver.job import run_silver
from pipelines.silver.progress import load_progress

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"


def _progress(spark, lake: Lake) -> dict[str, list]:
    return {f: json.loads(r["ddl"]) for (_, f), r in load_progress(spark, lake).items()}


def _queries(spark, lake: Lake, name: str) -> list:
    rows = (lake.read(spark, BRONZE_EVENTS)
            .where(f"event_type = 'QUERY' AND binlog_file = '{name}'")
            .select("start_pos", "schema_name", "query").collect())
    return sorted([r[0], r[1], r[2]] for r in rows)


def test_a_run_takes_known_files_query_events_from_progress(spark, tmp_path: Path) -> None:
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    names = sorted(p.name for p in SAMPLES.glob("mariadb-bin.0*"))
    for name in names[:3]:
        shutil.copy(SAMPLES / name, binlogs / name)
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    lake = Lake.of(cfg)
    run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
    first = run_silver(spark, cfg)
    progress = _progress(spark, lake)
    assert sorted(progress) == names[:3]
    for name in names[:3]:
        assert sorted(progress[name]) == _queries(spark, lake, name)
    assert any(progress[n] for n in names[:3])  # the samples create and alter tables

    # The old files' QUERY rows leave bronze; their states (and so progress) stay valid.
    lake.delete_where(spark, BRONZE_EVENTS, "event_type = 'QUERY'")
    for name in names[3:]:
        shutil.copy(SAMPLES / name, binlogs / name)
    run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True)
    second = run_silver(spark, cfg)
    after = _progress(spark, lake)
    for name in names[:3]:
        assert after[name] == progress[name]  # from progress, not from bronze (now empty)
    for name in names[3:]:
        assert sorted(after[name]) == _queries(spark, lake, name)
    assert second.quarantined == first.quarantined == 0
    assert first.appended + second.appended == 340  # every sample row change named

    # A file bronze indexes again is read again: its QUERY rows are back in bronze.
    (binlogs / names[0]).write_bytes((SAMPLES / names[0]).read_bytes() + b"")
    from pipelines.bronze.files import load_states, save_states

    st = load_states(spark, lake)[("default", names[0])]
    st.status, st.updated_at, st.size = "in_progress", None, 0  # forces a re-index
    save_states(spark, lake, [st])
    run_bronze(spark, cfg, binlog_dir=str(binlogs), files=[names[0]])
    run_silver(spark, cfg)
    assert sorted(_progress(spark, lake)[names[0]]) == _queries(spark, lake, names[0]) != []
