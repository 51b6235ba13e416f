"""The ``binlake`` command line on real files: decode, errors, exit codes, job entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli.main import main
from tests.support.python_run import run_python

CRC32_FILE = "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-crc32"


def test_decode_text_shows_positions_and_rows(corpus: Path, capsys) -> None:
    assert main(["decode", str(corpus / CRC32_FILE)]) == 0
    out = capsys.readouterr().out
    assert "# at 384 end 486 WRITE_ROWS" in out
    assert "### INSERT `simu_file_dev`.`folder` row 0" in out
    assert "###   @2='test2'" in out and "###   @5=2018-05-04 08:31:59" in out


def test_decode_jsonl_is_one_object_per_event(corpus: Path, capsys) -> None:
    assert main(["decode", "--format", "jsonl", str(corpus / CRC32_FILE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 303  # MANIFEST: "must read exactly 303 events"
    rows = [json.loads(x) for x in lines if '"WRITE_ROWS"' in x]
    assert rows[0]["pos"] == 384 and rows[0]["rows"][0]["after"][1] == "test2"


def test_decode_bad_file_is_a_clear_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "x.000001"
    bad.write_bytes(b"GIF89a not a binlog")
    assert main(["decode", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "x.000001, pos 0" in err and "not a binlog" in err


def test_bad_config_exits_2_naming_the_setting(tmp_path: Path, capsys) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("[bronze]\nbatch_rows = 0\n")
    assert main(["--conf", str(conf), "status"]) == 2
    assert "bronze.batch_rows" in capsys.readouterr().err


def test_bronze_job_entry_point_runs_as_module(tmp_path: Path, corpus: Path) -> None:
    d = tmp_path / "bl"
    d.mkdir()
    (d / "mysql-bin.000001").write_bytes((corpus / CRC32_FILE).read_bytes())
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.bronze", "--lake", str(tmp_path / "lake"),
         "--binlog-dir", str(d), "--all"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "mysql-bin.000001: completed, 303 events, 63 row changes" in proc.stdout


@pytest.mark.spark
def test_status_json_and_sql(spark, tmp_path: Path, corpus: Path, capsys) -> None:
    d = tmp_path / "bl"
    d.mkdir()
    (d / "mysql-bin.000001").write_bytes((corpus / CRC32_FILE).read_bytes())
    lake = str(tmp_path / "lake")
    assert main(["--lake", lake, "index", "--binlog-dir", str(d), "--all"]) == 0
    capsys.readouterr()
    assert main(["--lake", lake, "status", "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["files"][0]["status"] == "completed" and st["files"][0]["row_changes"] == 63
    assert main(["--lake", lake, "sql", "SELECT count(*) AS n FROM bronze_binlog_events "
                 "WHERE event_type = 'UPDATE'"]) == 0
    assert "| 23 |" in capsys.readouterr().out  # mariadb-binlog -v prints 23 "### UPDATE" rows


@pytest.mark.spark
@pytest.mark.mariadb
def test_snapshot_command_on_a_real_server(tmp_path: Path, capsys) -> None:
    from devtools.mariadb import MariaDBServer

    with MariaDBServer(binlog_row_metadata="MINIMAL") as server:
        server.execute("CREATE DATABASE app")
        server.execute("CREATE TABLE app.t (id INT PRIMARY KEY, e ENUM('x','y'), n INT UNSIGNED)")
        dsn = server.dsn()
        export = tmp_path / "snap.json"
        lake = str(tmp_path / "lake")
        assert main(["--lake", lake, "snapshot", "--source-dsn", dsn, "--schemas", "app",
                     "--export", str(export)]) == 0
    out = capsys.readouterr().out
    assert dsn.split("@")[0].split(":")[-1] not in out  # the password is never printed
    assert "snapshot: 1 tables, 3 columns, 0 fk constraints" in out.splitlines()  # app.t: id, e, n
    assert export.is_file()
    # The export imports into another lake (binlogs indexed away from their server).
    assert main(["--lake", str(tmp_path / "other"), "snapshot", "--import", str(export)]) == 0


@pytest.mark.spark
@pytest.mark.mariadb
def test_index_with_gold_dsn_runs_every_stage(tmp_path: Path, capsys, monkeypatch) -> None:
    import threading

    import pipelines.gold.job as gold_job
    import pipelines.quality as quality
    from devtools.mariadb import MariaDBServer

    # Quality checks the run's silver rows while gold exports them: quality waits here until
    # gold has begun (run one after the other, it would wait in vain).
    gold_began, seen = threading.Event(), {}
    real_quality, real_gold = quality.run_quality, gold_job.run_gold

    def spy_quality(*a, **k):
        seen["gold began first"] = gold_began.wait(120)
        seen["quality thread"] = threading.current_thread().name
        return real_quality(*a, **k)

    def spy_gold(*a, **k):
        gold_began.set()
        return real_gold(*a, **k)

    monkeypatch.setattr(quality, "run_quality", spy_quality)
    monkeypatch.setattr(gold_job, "run_gold", spy_gold)
    samples = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
    lake = str(tmp_path / "lake")
    with MariaDBServer() as gold:
        dsn = gold.dsn("binlake_gold")  # a database that does not exist yet is created
        assert main(["--lake", lake, "index", "--binlog-dir", str(samples), "--all",
                     "--gold-dsn", dsn]) == 0
        out = capsys.readouterr().out
        assert seen == {"gold began first": True, "quality thread": "index-quality_0"}, seen
        assert "silver: 5 bronze file(s) considered, 340 row changes appended" in out
        assert "quality: PASSED" in out
        assert out.index("quality: PASSED") < out.index("gold: silver v")
        n, bad = gold.execute("SELECT count(*), sum(pk_hash <> SHA2(pk_values, 256)) "
                              "FROM binlake_gold.binlog_events")[0]
        assert (n, bad) == (340, 0)
        # Run again: nothing new anywhere.
        assert main(["--lake", lake, "index", "--binlog-dir", str(samples), "--all",
                     "--gold-dsn", dsn]) == 0
        assert gold.execute("SELECT count(*) FROM binlake_gold.binlog_events")[0][0] == 340
        assert dsn.split("@")[0].split(":")[-1] not in capsys.readouterr().out


def test_the_command_keeps_ipython_out(tmp_path: Path) -> None:
    """``binlake`` (``cli.command``) runs without IPython: the Connect client imports it,
    when installed, only to size a progress bar (with ipykernel on the first DataFrame call:
    ~0.14 s of every command). ``main`` called from a notebook keeps it."""
    (tmp_path / "lake").mkdir()  # status reads a lake that is there (tests/lake/test_root.py)
    code = ("import sys\n"
            "from pipelines import cli\n"
            f"sys.argv = ['binlake', '--lake', {str(tmp_path / 'lake')!r}, 'status']\n"
            "rc = cli.command()\n"
            "print(rc, sys.modules.get('IPython', 'absent'), 'ipykernel' in sys.modules)\n")
    out = run_python(code, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "0 None False"


@pytest.mark.parametrize("platform_env, frozen", [({}, True),
                                                  ({"DATABRICKS_RUNTIME_VERSION": "16.4"}, False)])
def test_a_command_of_its_own_skips_the_interpreter_teardown(tmp_path: Path, platform_env,
                                                             frozen: bool) -> None:
    """``binlake`` (``cli.command``) freezes the garbage collector after every other exit
    handler: Python's teardown of pyspark, pandas and pyarrow then costs ~0.1 s instead of
    ~0.4 s (bench/pipeline.py's whole-command stages). The exit code, the output and the
    buffered output are unchanged; a Python that Spark or Databricks started is left alone.
    The handler registered before the command runs after its freeze."""
    import os

    (tmp_path / "lake").mkdir()
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))\n"
            "from pipelines import cli\n"
            f"sys.argv = ['binlake', '--lake', {str(tmp_path / 'lake')!r}, 'status']\n"
            "rc = cli.command()\n"
            "print('status printed', flush=False)\n"
            "sys.exit(rc + 3)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BINLAKE_")}
    env.update(platform_env)
    out = run_python(code, env=env, timeout=300, expect=3)
    lines = out.stdout.strip().splitlines()
    assert lines[-2:] == ["status printed", f"frozen at exit: {frozen}"], out.stdout


@pytest.mark.parametrize("stage", ["bronze", "silver", "gold", "stream"])
def test_a_stage_entry_point_takes_binlakes_options_for_it(stage: str) -> None:
    """``python -m pipelines.<stage>`` parses with a flat parser of its own: the same options
    as ``binlake <stage>`` and the global ones, the latter anywhere on the line."""
    import importlib

    from pipelines.cli.main import build_parser

    def options(parser) -> set[str]:
        return {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}

    top = build_parser()
    sub = next(a for a in top._actions if a.dest == "command").choices[stage]
    own = importlib.import_module(f"pipelines.{stage}.__main__").build_parser()
    assert options(own) == options(top) | options(sub)
    line = {"bronze": ["--binlog-dir", "d", "--all"], "silver": [], "gold": [],
            "stream": ["--server-id", "7"]}[stage]
    args = own.parse_args([*line, "--lake", "L", "-v", "--engine", "sail"])
    assert (args.lake, args.verbose, args.engine, args.command) == ("L", True, "sail", stage)


@pytest.mark.spark
def test_a_version_the_engine_cannot_read_is_named_not_called_bad_sql(spark, tmp_path: Path,
                                                                      capsys) -> None:
    """12 commits: the embedded engine checkpoints at version 10, then reads version 5 no more
    (Sail 0.7.2; delta-rs reads it). ``binlake sql`` and the SQL shell say what the engine
    cannot do and where to read it, not "bad SQL"."""
    import io

    from deltalake import DeltaTable

    from pipelines.cli.shell import Shell

    path = str(tmp_path / "t")
    for i in range(12):
        spark.createDataFrame([(i,)], "i int").write.format("delta").mode("append").save(path)
    assert len(DeltaTable(path, version=5).file_uris()) == 6  # delta-rs reads version 5
    lake = str(tmp_path / "lake")
    assert main(["--lake", lake, "sql", f"SELECT count(*) AS n FROM delta.`{path}` "
                 "VERSION AS OF 11"]) == 0
    assert "| 12 |" in capsys.readouterr().out
    assert main(["--lake", lake, "sql", f"SELECT count(*) FROM delta.`{path}` "
                 "VERSION AS OF 5"]) == 1
    err = capsys.readouterr().err
    assert "latest checkpoint" in err and "--engine spark" in err and "bad SQL" not in err
    assert "Missing commit file" in err and len(err.strip().splitlines()) == 1
    out = io.StringIO()
    assert not Shell(spark, out=out).run_sql(f"SELECT * FROM delta.`{path}` VERSION AS OF 5")
    said = out.getvalue()
    assert said.startswith("error: the embedded engine") and "--engine spark" in said
