"""Issue 46: ``binlake console`` in headless Chromium against a lake indexed from a real
MariaDB (tests/support/assist_lake.py): the key timeline and the table as of a moment show
the server's rows (read from the dumped DOM), changed columns are highlighted, screenshots
are painted; beyond loopback a token is required on every request.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
from PIL import Image

from tests.support.assist_lake import (ORDERS, AssistLake, build_lake, free_port, start,
                                       wait_http)

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--force-device-scale-factor=1"]
HIGHLIGHT = (0xff, 0xe8, 0xa3)  # td.changed in console_pages._CSS


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not installed (run `make chromium`; `make test` does)")


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> AssistLake:
    return build_lake(tmp_path_factory.mktemp("console46"))


@pytest.fixture(scope="module")
def console(lake: AssistLake, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("console-log") / "console.log"
    env = {k: v for k, v in os.environ.items() if k != "BINLAKE_CONSOLE_TOKEN"}
    proc = start(["--lake", lake.lake, "console", "--port", str(port)],
                 {**env, "BINLAKE_SOURCE_DSN": lake.dsn}, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/", proc, log)
        yield base, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _dom(url: str, profile: Path) -> str:
    run = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                          "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def _shot(url: str, path: Path, profile: Path, size: str = "1000,900") -> np.ndarray:
    run = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                          f"--screenshot={path}", f"--window-size={size}", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and path.is_file(), run.stderr[-2000:]
    return np.asarray(Image.open(path).convert("RGB"))


def _cells(row_html: str) -> list[tuple[str, str]]:
    """(class, text) of each td."""
    return [(cls or "", html.unescape(text)) for cls, text in
            re.findall(r'<td(?: class="([^"]*)")?>([^<]*)</td>', row_html)]


def _text(cell: tuple[str, str]) -> str | None:
    return None if "null" in cell[0] else cell[1]


def test_key_timeline_shows_the_servers_row(lake: AssistLake, console, tmp_path) -> None:
    base, log = console
    url = f"{base}/key?{urlencode({'table': ORDERS, 'pk': '7'})}"
    dom = _dom(url, tmp_path / "profile")
    changes = re.findall(r'<div class="change" data-seq="\d+" data-type="(\w+)">(.*?)</div>',
                         dom, re.S)
    assert [t for t, _ in changes] == ["INSERT", "UPDATE", "UPDATE", "UPDATE"]
    timeline = []
    for _, body in changes:
        rows = re.findall(r'<tr data-column="([^"]+)"><th>[^<]*</th>(.*?)</tr>', body, re.S)
        timeline.append({col: _cells(cells) for col, cells in rows})
    last = timeline[-1]
    final = dict(zip(["id", "status", "amount", "note"], lake.key7_final))
    assert {c: _text(cells[1]) for c, cells in last.items()} == {
        c: str(v) for c, v in final.items()}
    # highlighted: what each UPDATE changed, nothing else
    assert [sorted(c for c, cells in change.items() if "changed" in cells[1][0])
            for change in timeline[1:]] == [["status"], ["amount"], ["note", "status"]]
    assert _text(last["status"][0]) == "paid" and _text(last["note"][0]) is None
    assert lake.password not in dom

    pixels = _shot(url, tmp_path / "key.png", tmp_path / "profile")
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20  # not blank
    assert int(np.all(pixels == HIGHLIGHT, axis=-1).sum()) > 2000  # highlighted cells painted


def test_table_as_of_a_moment_is_the_servers_select(lake: AssistLake, console,
                                                     tmp_path) -> None:
    base, _ = console
    url = f"{base}/asof?{urlencode({'table': ORDERS, 'at': lake.moment})}"
    dom = _dom(url, tmp_path / "profile")
    table = re.search(r"<table id=\"asof\">(.*?)</table>", dom, re.S).group(1)
    assert re.findall(r"<th>([^<]*)</th>", table) == ["id", "status", "amount"]
    rows = [tuple(_text(c) for c in _cells(r))
            for r in re.findall(r'<tr class="row">(.*?)</tr>', table, re.S)]
    assert sorted(rows) == sorted(tuple(str(v) for v in r) for r in lake.orders_at_moment)
    assert len(rows) == 30

    pixels = _shot(url, tmp_path / "asof.png", tmp_path / "profile", "1000,1200")
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20
    # the home page: the volume bars and the tables; quality; a bad table is told
    home = _dom(base + "/", tmp_path / "profile")
    assert re.search(r'<rect class="bar" data-hour="[^"]+" data-changes="\d+"', home)
    assert "mcp46.orders" in home and "mcp46.notes" in home
    assert re.search(r'<svg class="spark" data-table="mcp46.orders"[^>]*><rect class="sbar"',
                     home)
    assert 'id="quality-status">passed<' in _dom(base + "/quality", tmp_path / "profile")
    bad = _dom(f"{base}/asof?{urlencode({'table': 'mcp46.nope', 'at': lake.moment})}",
               tmp_path / "profile")
    assert "mcp46.nope: unknown table" in bad
    bad = _dom(f"{base}/asof?{urlencode({'table': ORDERS, 'at': 'soon'})}",
               tmp_path / "profile")
    assert "&#x27;soon&#x27;" in bad or "'soon'" in bad
    for page in (home, bad):
        assert lake.password not in page


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                      timeout=120).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_beyond_loopback_needs_a_token(lake: AssistLake, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BINLAKE_CONSOLE_TOKEN"}
    run = subprocess.run([sys.executable, "-m", "pipelines", "--lake", lake.lake,
                          "console", "--host", "0.0.0.0", "--port", str(free_port())],
                         env=env, capture_output=True, text=True, timeout=60,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert run.returncode == 2 and "--token" in run.stderr

    port, log = free_port(), tmp_path / "console.log"
    proc = start(["--lake", lake.lake, "console", "--host", "0.0.0.0", "--port", str(port)],
                 {**env, "BINLAKE_CONSOLE_TOKEN": "t0ken-46"}, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/quality", proc, log)
        assert _status(base + "/") == 401
        assert _status(base + "/key?table=mcp46.orders&pk=7&token=wrong") == 401
        assert _status(base + "/quality?token=t0ken-46") == 200
        assert _status(base + "/quality", {"Authorization": "Bearer t0ken-46"}) == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
