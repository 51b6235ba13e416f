"""Silver's compiled loops loaded ahead of the rows (``render_warm``).

The load is worth something only if it loads exactly the machine code a real run calls: a
loop called with other argument types would be compiled again on the run's first batch (or
worse, the warm-up would load code no run uses). So, in a fresh interpreter (nothing loaded
by earlier tests): warm, note each loop's loaded signatures, render real bronze rows of the
shipped sample binlogs through the compiled path, and the loops must hold the same
signatures. The warm-up's own two rows must render as silver (not quarantine).

Once loaded, a process uses them for every run, however small (a stream's follows): a
silver run of the small sample files renders the Arrow way in a fresh process and through
the loops after a warm-up, with the same silver.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.python_run import run_python

REPO = Path(__file__).resolve().parent.parent.parent

# Counts the groups render_fast rendered (True) or handed to the Arrow path (False).
_SPY = r"""
used = []
real = render_fast.render
def spy(*args):
    out = real(*args)
    used.append(out is not None)
    return out
render_fast.render = spy
"""

_SCRIPT = r"""
import json, sys
import pyarrow as pa, pyarrow.compute as pc
from pipelines.bronze.decode_task import decode_file_batches
from pipelines.bronze.table_maps import table_maps_in
from pipelines.silver import pk_hash_jit, render_fast, render_jit, render_warm
from pipelines.silver.naming import NamingPlan
from pipelines.silver.pk_hash import pk_hash
from pipelines.silver.render_batch import BatchRenderer

LOOPS = ((render_jit, "render_side"), (render_jit, "changed_columns"), (render_jit, "gather"),
         (pk_hash_jit, "sha256_hex"))

def loaded():
    return {n: sorted(str(s) for s in getattr(m, n).signatures) for m, n in LOOPS}

before = loaded()
ok = render_warm.warm()
warmed = loaded()
""" + _SPY + r"""
batches, ddl, maps = [], [], {}
for path in sys.argv[1:]:
    for b in decode_file_batches(path, source_id="s", subprocess=False, batch_rows=5000):
        maps.update(table_maps_in([b]))
        q = b.filter(pc.equal(b.column("event_type"), "QUERY"))
        ddl += [tuple(r.values()) for r in q.select(
            ["source_id", "binlog_file", "start_pos", "schema_name", "query"]).to_pylist()]
        b = b.filter(pc.is_in(b.column("event_type"), pa.array(["INSERT", "UPDATE", "DELETE"])))
        if b.num_rows:
            batches.append(b)
plan = NamingPlan.build(ddl, [])
plan.table_maps = maps
renderer = BatchRenderer(plan, compiled=True)
rendered = [renderer.render(b)[0] for b in batches]
rows = sum(r.num_rows for r in rendered)
for r in rendered:  # as the run's tasks hash what they rendered (transform.with_pk_hash)
    pk_hash(r.column("pk_values").combine_chunks(), True)
print(json.dumps({"ok": ok, "before": before, "warmed": warmed, "after": loaded(),
                  "compiled_groups": sum(used), "rows": rows}))
"""


def test_warm_loads_exactly_what_a_real_run_calls() -> None:
    binlogs = sorted(str(p) for p in (REPO / "samples" / "binlogs").glob("mariadb-bin.0*"))
    out = run_python(_SCRIPT, *binlogs)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ok"] is True  # the warm-up's two rows rendered as silver
    assert all(not sigs for sigs in got["before"].values())  # a fresh interpreter
    assert all(len(sigs) == 1 for sigs in got["warmed"].values()), got["warmed"]
    # The real rows went through the compiled loops, and loaded nothing more.
    assert got["rows"] > 0 and got["compiled_groups"] > 0, got
    assert got["after"] == got["warmed"], (got["warmed"], got["after"])


def test_warm_in_background_loads_nothing_off_the_embedded_engine() -> None:
    # No embedded engine in this interpreter (JVM Spark and Connect servers render in their
    # own Python workers): no load is started.
    code = ("import threading\n"
            "from pipelines.config import Config\n"
            "from pipelines.silver import render_warm\n"
            "print(render_warm.warm_in_background(Config()), "
            "sorted(t.name for t in threading.enumerate()))")
    out = run_python(code, timeout=120)
    assert out.stdout.strip() == "False ['MainThread']"


def test_with_render_workers_the_loops_load_in_the_workers_not_here(spark) -> None:
    # On the embedded engine this process renders, unless silver.render_in_subprocess hands
    # the rows to worker processes: then `binlake index` and a stream load nothing here.
    from pipelines.config import load_config
    from pipelines.silver import render_warm

    assert render_warm.renders_here(load_config(env={}))
    workers = load_config(env={}, overrides={"silver.render_in_subprocess": True})
    before = render_warm._STARTED
    assert not render_warm.renders_here(workers)
    assert render_warm.warm_in_background(workers) is False
    assert render_warm._STARTED is before


_RUN_SCRIPT = r"""
import dataclasses, json, shutil, sys, tempfile
from pipelines.config import Config
from pipelines.engine.session import get_spark
from pipelines.bronze.job import run_bronze
from pipelines.lake.tables import SILVER_EVENTS, Lake
from pipelines.silver import render_fast, render_warm
from pipelines.silver.job import run_silver

work = tempfile.mkdtemp()
cfg = Config()
cfg = dataclasses.replace(cfg, lake=dataclasses.replace(cfg.lake, root=work + "/lake"))
spark = get_spark(cfg.engine)
run_bronze(spark, cfg, binlog_dir=sys.argv[1], all_files=True)
""" + _SPY + r"""

def silver():
    shutil.rmtree(work + "/lake/silver", ignore_errors=True)
    used.clear()
    res = run_silver(spark, cfg)
    rows = Lake.of(cfg).read(spark, SILVER_EVENTS).collect()
    return res.appended, sum(used), sorted(json.dumps(r.asDict(), default=str) for r in rows)

cold = silver()
loaded_before = render_fast.loaded()
ok = render_warm.warm()
warm = silver()
print(json.dumps({"loaded_before": loaded_before, "ok": ok, "loaded": render_fast.loaded(),
                  "cold": cold[:2], "warm": warm[:2], "same": cold[2] == warm[2]}))
"""


def test_a_process_holding_the_loops_renders_every_run_with_them() -> None:
    # The sample files are far below silver.compiled_min_mb: a fresh process renders them
    # the Arrow way; once the loops are loaded (a stream warms them at its start) the same
    # run renders through them, and silver is the same.
    out = run_python(_RUN_SCRIPT, str(REPO / "samples" / "binlogs"))
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded_before"] is False and got["ok"] is True and got["loaded"] is True, got
    appended, compiled_groups = got["cold"]
    assert appended > 0 and compiled_groups == 0, got
    assert got["warm"][0] == appended and got["warm"][1] > 0, got
    assert got["same"], got


_ROWS_SCRIPT = _RUN_SCRIPT.split("cold = silver()")[0] + r"""
by_bytes = silver()  # the samples are far below compiled_min_mb and the default row count
cfg = dataclasses.replace(cfg, silver=dataclasses.replace(
    cfg.silver, compiled_min_rows=by_bytes[0] // 2))
by_rows = silver()
print(json.dumps({"by_bytes": by_bytes[:2], "by_rows": by_rows[:2],
                  "same": by_bytes[2] == by_rows[2]}))
"""


def test_a_run_of_many_row_changes_in_few_mb_renders_with_the_loops() -> None:
    # silver.compiled_min_rows: narrow tables hold many row changes in few MB, and the rows
    # are what the loops save on. A fresh process renders the small samples the Arrow way;
    # with the threshold below their row changes it loads the loops for the run, and silver
    # is the same.
    out = run_python(_ROWS_SCRIPT, str(REPO / "samples" / "binlogs"))
    got = json.loads(out.stdout.strip().splitlines()[-1])
    appended, compiled_groups = got["by_bytes"]
    assert appended > 0 and compiled_groups == 0, got
    assert got["by_rows"][0] == appended and got["by_rows"][1] > 0, got
    assert got["same"], got
