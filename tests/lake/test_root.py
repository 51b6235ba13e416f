"""A ``--lake`` that names no lake (pipelines/lake/root.py): one line naming the path, exit 2,
nothing created. Before: ``binlake --lake /etc/passwd status`` printed a NotADirectoryError
traceback, ``quality`` on a missing path created ``quality/`` there and reported ``PASSED, 0
rule(s)``, ``status`` on a mistyped path exited 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cli.main import main

READERS = [["status"], ["status", "--format", "json"], ["quality"], ["silver"], ["mirror"],
           ["repair"], ["optimize"], ["vacuum"]]


def _missing(path: Path) -> str:
    return (f"binlake: configuration error: lake {path}: no such directory (--lake, "
            "lake.root); `binlake index --binlog-dir DIR --all` creates a lake\n")


def _file(path: Path) -> str:
    return f"binlake: configuration error: lake {path}: not a directory (--lake, lake.root)\n"


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c))
def test_a_reader_on_a_missing_lake_says_so_and_creates_nothing(tmp_path: Path, capsys,
                                                               command: list[str]) -> None:
    lake = tmp_path / "lkae"
    assert main(["--lake", str(lake), *command]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", _missing(lake))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READERS + [["sql", "SELECT 1"], ["sql"],
                                               ["index", "--binlog-dir", ".", "--all"],
                                               ["bronze", "--binlog-dir", ".", "--all"]],
                         ids=lambda c: " ".join(c))
def test_a_file_as_the_lake_is_one_line_not_a_traceback(tmp_path: Path, capsys,
                                                        command: list[str]) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    assert main(["--lake", str(passwd), *command]) == 2
    assert capsys.readouterr() == ("", _file(passwd))
    assert [p.name for p in tmp_path.iterdir()] == ["passwd"]


def test_a_relative_lake_is_named_by_its_absolute_path(tmp_path: Path, capsys,
                                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--lake", "lake", "status"]) == 2
    assert capsys.readouterr().err == _missing(tmp_path / "lake")


@pytest.mark.spark
def test_an_existing_empty_lake_is_read_and_a_writer_creates_a_missing_one(
        spark, tmp_path: Path, capsys) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    assert main(["--lake", str(lake), "status"]) == 0
    assert capsys.readouterr().out.startswith(f"lake: {lake}\nbronze: no table yet\n")
    samples = Path(__file__).resolve().parents[2] / "samples" / "binlogs"
    new = tmp_path / "new"
    assert main(["--lake", str(new), "bronze", "--binlog-dir", str(samples),
                 "--files", "mariadb-bin.000004"]) == 0
    assert (new / "bronze" / "binlog_events").is_dir()
    # a lake given as a file:// URL is checked as its path
    assert main(["--lake", f"file://{tmp_path / 'none'}", "status"]) == 2
    assert capsys.readouterr().err == _missing(tmp_path / "none")


@pytest.mark.parametrize("stage, expect", [("silver", "missing"), ("bronze", "file")])
def test_a_stage_entry_point_checks_the_lake_as_binlake_does(tmp_path: Path, stage: str,
                                                             expect: str) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    lake = tmp_path / "lake"
    if expect == "file":
        lake.write_text("")
    extra = ["--binlog-dir", str(tmp_path), "--all"] if stage == "bronze" else []
    proc = subprocess.run([sys.executable, "-m", f"pipelines.{stage}", "--lake", str(lake),
                           *extra], capture_output=True, text=True, cwd=root, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (_missing(lake) if expect == "missing" else _file(lake))
    assert [p.name for p in tmp_path.iterdir()] == ([] if expect == "missing" else ["lake"])
