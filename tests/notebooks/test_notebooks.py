"""The analyst notebooks run end to end against a lake built from real MariaDB binlogs.

What each cell shows is checked against what MariaDB says, not against binlake: the row
changes ``mariadb-binlog -vv`` prints for the shipped samples (``tests/support/binlog_verbose``:
their order, types, keys, GTIDs, values, and the columns an UPDATE changed, before and after
image compared) and the server's final tables (``samples/binlogs/expected_tables.json``).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import nbformat
import pytest
from deltalake import DeltaTable
from nbclient import NotebookClient

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.silver.job import run_silver
from tests.support.binlog_verbose import RowChange, normalize_printed, read_row_changes

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples" / "binlogs"


def _tool_changes() -> list[RowChange]:
    """Every row change of the samples, in binlog order, as ``mariadb-binlog -vv`` prints."""
    return [c for f in sorted(SAMPLES.glob("mariadb-bin.0*")) for c in read_row_changes(f)]


def _after(rc: RowChange, i: int) -> str | None:
    """Column ``i`` of the after image as text (an ENUM by its label, from the TABLE_MAP)."""
    v = normalize_printed(rc.after[i], rc.after_types[i])
    if v is not None and rc.after_types[i].startswith("ENUM"):
        return ([""] + re.findall(r"'([^']*)'", rc.column_types[i]))[int(v)]
    return v.decode()


def _changed(rc: RowChange) -> list[str]:
    """The columns an UPDATE changed: printed differently in its before and after image."""
    return [n for i, n in enumerate(rc.columns) if rc.before[i] != rc.after[i]]


def _key(rc: RowChange) -> str:
    return (rc.after or rc.before)[0]


def _shown(text: str) -> list[list[str]]:
    """The rows of a ``DataFrame.show()`` table (header first), cells stripped; only the
    columns before the last are safe to read (the last may hold a ``|``)."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]


def _executed(name: str, parameters: str):
    """The notebook ``name`` run by a real kernel, its ``parameters`` cell replaced."""
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    next(c for c in nb.cells if "parameters" in c.metadata.get("tags", [])).source = parameters
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute(env=env)
    return nb


def test_row_change_history_notebook(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    run_bronze(spark, cfg, binlog_dir=str(SAMPLES), all_files=True)
    run_silver(spark, cfg)
    # The samples are one silver commit: version 0 (the time-travel cell) is their whole history.
    assert DeltaTable(cfg.table_path("silver", "binlog_events")).version() == 0
    nb = _executed("row_change_history.ipynb",
                   f'LAKE = "{lake}"\nTABLE = "shop.orders"\nPK = "7"\n'
                   'WINDOW_START = "2000-01-01 00:00:00"\nWINDOW_END = "2100-01-01 00:00:00"')
    outputs = {i: "".join(o.get("text", "") for o in c.get("outputs", []))
               for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    text = "\n".join(outputs.values())
    assert "Error" not in text and "Traceback" not in text
    assert "silver_binlog_events" in text
    changes = _tool_changes()
    orders = [c for c in changes if (c.schema, c.table) == ("shop", "orders")]

    # The table's changes in the window (all of time): its first 20 in binlog order.
    window = _shown(outputs[4])
    assert window[0][:5] == ["event_timestamp", "event_type", "pk_values", "changed_columns",
                             "row_before"]
    assert [r[1:3] for r in window[1:]] == [[c.event_type, _key(c)] for c in orders[:20]]
    assert outputs[4].rstrip().endswith("only showing top 20 rows")  # of 240

    # The history of order 7: its INSERT and its UPDATE, with their GTIDs and images.
    history = _shown(outputs[6])
    mine = [c for c in orders if _key(c) == "7"]
    assert [r[2:5] for r in history[1:]] == [
        [c.gtid, c.event_type, "NULL" if c.event_type == "INSERT" else json.dumps(_changed(c))]
        for c in mine]
    heads = [json.dumps({"order_id": int(_after(c, 0)), **{n: _after(c, i) for i, n in
                                                          enumerate(c.columns[:4]) if i}},
                        ensure_ascii=False)[:-1] + ", " for c in mine]  # more columns follow
    assert [r[5] for r in history[1:]] == [h[:77] + "..." for h in heads]  # cut at 80

    # Version 0: the latest image per key, the first 10 keys by pk_values (text order), are
    # the server's final rows.
    final = json.loads((SAMPLES / "expected_tables.json").read_text())["tables"]["shop.orders"]
    first = sorted(final["rows"], key=lambda r: r[0])[:10]
    as_of = _shown(outputs[8])[1:]
    assert [r[0] for r in as_of] == [r[0] for r in first]
    for row, want in zip(as_of, first):
        head = json.dumps({"order_id": int(want[0]), "customer": want[1], "total": want[2]},
                          ensure_ascii=False)[:-1]
        assert row[1].startswith(head), (row, head)

    # Row changes per type: DELETE 20, INSERT 274, UPDATE 46.
    assert _shown(outputs[10]) == [["event_type", "row_changes"]] + [
        [k, str(n)] for k, n in sorted(Counter(c.event_type for c in changes).items())]


def test_change_pictures_notebook_draws_its_figures(spark, tmp_path: Path) -> None:
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir", str(SAMPLES),
                 "--all", "--mirror"]) == 0
    nb = _executed("change_pictures.ipynb",
                   f'LAKE = "{lake}"\nTABLE = "shop.orders"\nKEY_COLUMN = "order_id"\n'
                   'KEY = "7"\nVALUE_COLUMN = "status"')
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs)
    assert "Traceback" not in text
    assert re.search(r"^\d+ views; shop__orders__history registered: True$", text, re.M), text
    figures = [c for c in code if any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert len(figures) == 3  # volume per hour, most changed columns, one key's timeline
    shown = ["".join(o.get("data", {}).get("text/plain", "") for o in c.outputs
                     if o.output_type == "execute_result") for c in figures]
    changes = _tool_changes()

    # Volume: every sample event is of 2026-11-22 03:xx UTC (the tool's event headers), so one
    # hour, and per table its row changes.
    volume = [m.groups() for m in re.finditer(r"^\d+\s+(\S+ \S+)\s+(\S+)\s+(\d+)$", shown[0],
                                              re.M)]
    assert volume == [("2026-11-22 03:00:00", t, str(n)) for t, n in
                      sorted(Counter(f"{c.schema}.{c.table}" for c in changes).items())]

    # The most changed columns: per column, the UPDATEs whose images differ there (top 15).
    updates = Counter(f"{c.schema}.{c.table}.{n}" for c in changes if c.event_type == "UPDATE"
                      for n in _changed(c))
    columns = [(m.group(1), int(m.group(2)))
               for m in re.finditer(r"^\d+\s+(\S+)\s+(\d+)$", shown[1], re.M)]
    assert columns == sorted(updates.items(), key=lambda kv: (-kv[1], kv[0]))[:15]

    # Order 7's timeline: a version per INSERT/UPDATE, labelled with its status.
    versions = [m.groups() for m in re.finditer(r"^\d+\s+(INSERT|UPDATE|DELETE)\s+(\S+)\s*$",
                                                shown[2], re.M)]
    assert versions == [(c.event_type, _after(c, 3)) for c in changes
                        if (c.schema, c.table) == ("shop", "orders") and _key(c) == "7"
                        and c.event_type != "DELETE"]  # [INSERT new, UPDATE shipped]
