"""``binlake sql`` without a query, driven through a pseudo-terminal like a person would:
prompts, a multi-line statement, ``\\d`` and ``\\d NAME``, a one-line error, Ctrl-C cancelling a
long statement, the pager, and the history file carried into a second run (the up arrow
recalls the last statement)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from pipelines.cli.shell import split_statements

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
UP = "\x1b[A"


def test_split_statements_respects_quotes_and_comments() -> None:
    done, rest = split_statements("SELECT ';' AS a; SELECT \"x;\" -- c;\n, `a;b` FROM t; SELECT")
    assert done == ["SELECT ';' AS a", "SELECT \"x;\" -- c;\n, `a;b` FROM t"]
    assert rest.strip() == "SELECT"
    assert split_statements("SELECT 'it\\'s;' ;") == (["SELECT 'it\\'s;'"], "")


def _controlling_tty() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    """A child process on a pseudo-terminal; :meth:`expect` waits for a regex in its output."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        # a session of its own with the pty as its controlling terminal, so Ctrl-C (\x03)
        # sends SIGINT as a terminal does
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=ROOT, preexec_fn=_controlling_tty)
        os.close(slave)
        self.buf = ""

    def expect(self, pattern: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.buf)
            if m:
                seen, self.buf = self.buf[:m.end()], self.buf[m.end():]
                return seen
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {pattern!r}; got:\n{self.buf}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError(f"child ended waiting for {pattern!r}; got:\n{self.buf}")
                self.buf += data.decode("utf-8", "replace").replace("\r\n", "\n")

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # not left burning a core
            self.proc.wait()
            raise
        finally:
            os.close(self.master)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    from pipelines.cli.main import main

    lake = tmp_path_factory.mktemp("shell") / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir",
                 str(ROOT / "samples" / "binlogs"), "--all", "--mirror"]) == 0
    return lake


def _shell(lake: Path, home: Path) -> Pty:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(home), TERM="xterm",
               PAGER="sed -e s/^/PAGED:/", BINLAKE_HISTORY="")
    return Pty([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake), "sql"], env)


def test_interactive_shell_through_a_pty(spark, lake: Path, tmp_path: Path) -> None:
    orders = spark.read.format("delta").load(str(lake / "mirror" / "shop" / "orders")).count()
    sh = _shell(lake, tmp_path)
    sh.expect(r"binlake> ")
    sh.send("\\d\n")
    listing = sh.expect(r"binlake> ")
    assert re.search(rf"PAGED:\| shop__orders +\| view +\| {orders} +\|", listing), listing
    assert "silver_binlog_events" in listing and "shop__orders__history" in listing
    sh.send("\\d shop__orders\n")
    columns = sh.expect(r"binlake> ")
    assert re.search(r"\| __seq +\| bigint ", columns), columns
    sh.send("SELECT nope FROM nowhere;\n")
    error = sh.expect(r"binlake> ")
    assert "error:" in error and "Traceback" not in error
    # the echoed statement, one error line, the next prompt
    assert [ln for ln in error.splitlines() if ln.strip()][1:] == [
        error.splitlines()[1], "binlake> "], error
    sh.send("SELECT count(*) AS n\n")
    sh.expect(r"     -> ")
    sh.send("FROM shop__orders;\n")
    result = sh.expect(r"binlake> ")
    assert re.search(rf"PAGED:\| {orders} +\|", result), result
    sh.send("\\q\n")
    assert sh.close() == 0
    history = (tmp_path / ".binlake_history").read_text()
    assert "SELECT count(*) AS n FROM shop__orders;" in history
    assert "\\q" not in history

    again = _shell(lake, tmp_path)  # a new run: the up arrow brings back the last statement
    again.expect(r"binlake> ")
    again.send(UP + "\n")
    recalled = again.expect(r"binlake> ")
    assert re.search(rf"PAGED:\| {orders} +\|", recalled), recalled
    # Ctrl-C cancels a long statement: one line, a prompt, and Ctrl-D still quits at once
    # (the embedded engine may go on with the statement's work: the shell does not wait)
    again.send("SELECT count(DISTINCT (id * 7919) % 1000003) AS slow FROM range(0, 4000000000);\n")
    time.sleep(2)
    again.send("\x03")
    cancelled = again.expect(r"binlake> ")
    assert "cancelled" in cancelled and "Traceback" not in cancelled, cancelled
    again.send("\x04")  # Ctrl-D
    assert again.close() == 0


def test_piped_statements_without_a_terminal(lake: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "pipelines.cli.main", "--lake", str(lake), "sql"],
                         input="SELECT 1 AS one;\nSELECT 2\n AS two;\n", text=True,
                         capture_output=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| one |" in out.stdout and "| two |" in out.stdout and "binlake>" not in out.stdout
