"""The analyst notebooks run end to end against a lake built from real MariaDB binlogs."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pipelines.bronze.job import run_bronze
from pipelines.config import load_config
from pipelines.silver.job import run_silver

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_row_change_history_notebook(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    cfg = load_config(env={}, overrides={"lake.root": str(lake)})
    run_bronze(spark, cfg, binlog_dir=str(ROOT / "samples" / "binlogs"), all_files=True)
    run_silver(spark, cfg)
    nb = nbformat.read(ROOT / "notebooks" / "row_change_history.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = (f'LAKE = "{lake}"\nTABLE = "shop.orders"\nPK = "7"\n'
                     'WINDOW_START = "2000-01-01 00:00:00"\nWINDOW_END = "2100-01-01 00:00:00"')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute(env=env)
    outputs = {i: "".join(o.get("text", "") for o in c.get("outputs", []))
               for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    text = "\n".join(outputs.values())
    assert "Error" not in text and "Traceback" not in text
    assert "silver_binlog_events" in text
    # The history of order 7: its INSERT (and later changes) in binlog order.
    history = outputs[6]
    assert "INSERT" in history and '"order_id": 7' in history


def test_change_pictures_notebook_draws_its_figures(spark, tmp_path: Path) -> None:
    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir", str(ROOT / "samples" / "binlogs"),
                 "--all", "--mirror"]) == 0
    nb = nbformat.read(ROOT / "notebooks" / "change_pictures.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = (f'LAKE = "{lake}"\nTABLE = "shop.orders"\nKEY_COLUMN = "order_id"\n'
                     'KEY = "7"\nVALUE_COLUMN = "status"')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute(env=env)
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs)
    assert "Traceback" not in text and "registered: True" in text
    figures = [c for c in code if any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert len(figures) == 3  # volume per hour, most changed columns, one key's timeline
    timeline = "".join(o.get("data", {}).get("text/plain", "") for o in figures[-1].outputs)
    assert "INSERT" in timeline and "shipped" in timeline
