"""``make test``'s MinIO build in the background (Makefile: minio-background): a server start
waits while the build runs, and a failed build is an error with its log's end
(devtools/minio.py, ``wait_for_build``). The build is a real process (``sleep``, then a
shell writing ``build.rc`` as the Makefile's does)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from devtools import minio


@pytest.fixture
def build_dir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("BINLAKE_MINIO_BIN", raising=False)
    where = minio.default_binary().parent
    where.mkdir(parents=True)
    return where


def _background(where: Path, seconds: float, rc: int) -> subprocess.Popen:
    proc = subprocess.Popen(["sh", "-c", f"sleep {seconds}; echo build output > "
                             f"'{where}/build.log'; echo {rc} > '{where}/build.rc'"])
    (where / "build.pid").write_text(f"{proc.pid}\n")
    return proc


def test_a_start_waits_for_the_build_then_goes_on(build_dir: Path, capsys) -> None:
    proc = _background(build_dir, 1.5, 0)
    began = time.monotonic()
    minio.wait_for_build(timeout=30)
    assert time.monotonic() - began >= 1.0
    proc.wait()
    err = capsys.readouterr().err
    assert f"minio: waiting for its build in the background (log {build_dir}/build.log)" in err
    assert "minio: built in the background, waited " in err


def test_a_failed_build_is_an_error_with_its_log(build_dir: Path) -> None:
    proc = _background(build_dir, 0.5, 1)
    with pytest.raises(minio.MinioStartError) as e:
        minio.wait_for_build(timeout=30)
    proc.wait()
    assert str(e.value) == (f"the MinIO build into {build_dir} failed (exit 1):\n"
                            "build output\n")


def test_no_build_running_no_wait(build_dir: Path, capsys) -> None:
    (build_dir / "build.pid").write_text("999999999\n")  # no such process
    minio.wait_for_build(timeout=0)
    (build_dir / "build.pid").write_text("1\n")  # alive, but the build ended
    (build_dir / "build.rc").write_text("0\n")
    minio.wait_for_build(timeout=0)
    assert capsys.readouterr().err == ""


def test_a_build_past_the_timeout_is_an_error(build_dir: Path) -> None:
    proc = _background(build_dir, 30, 0)
    try:
        with pytest.raises(minio.MinioStartError) as e:
            minio.wait_for_build(timeout=0.1)
        assert str(e.value) == f"the MinIO build into {build_dir} did not end within 0 min"
    finally:
        proc.kill()
        proc.wait()


def test_the_build_waited_for_is_that_of_binlake_minio_bin(tmp_path: Path, monkeypatch) -> None:
    # `make test MINIO_DIR=DIR` builds into DIR and names DIR/minio in BINLAKE_MINIO_BIN.
    where = tmp_path / "elsewhere"
    where.mkdir()
    monkeypatch.setenv("BINLAKE_MINIO_BIN", str(where / "minio"))
    proc = _background(where, 1.0, 0)
    began = time.monotonic()
    minio.wait_for_build(timeout=30)
    assert time.monotonic() - began >= 0.5
    proc.wait()
