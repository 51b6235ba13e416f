"""reconstruct never folds a history with holes: changes of the table that silver holds in
quarantine (no schema named them) make it refuse, in one line naming the first of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.bronze.job import run_bronze
from pipelines.cli.main import main
from pipelines.config import load_config
from pipelines.silver.job import run_silver

pytestmark = [pytest.mark.spark]

JSON8 = "blackbeam__rust_mysql_common/test-data__binlogs__json.binlog.000001"


def test_reconstruct_refuses_a_history_with_quarantined_changes(spark, corpus, tmp_path: Path,
                                                                capsys) -> None:
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    shutil.copy(Path(corpus) / JSON8, binlogs / "json.000001")
    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    assert not run_bronze(spark, cfg, binlog_dir=str(binlogs), all_files=True).failed
    run_silver(spark, cfg)  # MINIMAL row metadata and no snapshot: every change quarantined
    code = main(["--lake", cfg.lake.root, "reconstruct", "--table", "mysql.t", "--pos",
                 "json.000001:3000"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "mysql.t: 12 change(s) before json.000001:3000 are in quarantine" in err
    assert "json.000001:1059" in err  # the first one
