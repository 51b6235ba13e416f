"""The quality report's trends (issue 12 §3): three stored runs, one with a failing and a
warning rule, rendered by headless Chromium; the DOM holds both charts with a cell per rule
and run and a bar per run, and the screenshot shows the cells' and bars' colours (the SVG
really renders)."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.quality.trends import (DATASET_COLOURS, STATUS_COLOURS, points_from_rows,
                                      render_trends)

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--force-device-scale-factor=1"]
FAILING_RULES = """
[rules.pk_values_not_null.silver]
description = "pk_values is not NULL"
action = "fail"
expect = "not_null"
column = "pk_values"

[rules.never_true.silver]
description = "a rule every row fails (warn only)"
action = "warn"
expect = "condition"
condition = "false"

[rules.no_deletes.silver]
description = "no DELETEs (the samples have some: fails)"
action = "fail"
expect = "condition"
condition = "event_type != 'DELETE'"
"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not installed (run `make chromium`; `make test` does)")


def test_points_keep_the_last_runs_oldest_first() -> None:
    t = dt.datetime(2026, 1, 1)
    rows = [{"run_id": f"r{i}", "run_time": t + dt.timedelta(hours=i), "name": "a",
             "dataset": "silver", "status": "passed" if i % 2 else "failed",
             "passed_records": 10 * i, "failed_records": i % 2 == 0} for i in range(5)]
    points = points_from_rows(rows, last=3)
    assert [p.run_id for p in points] == ["r2", "r3", "r4"]
    assert points[0].statuses[("a", "silver")] == ("failed", 1)
    assert points[1].rows_checked == {"silver": 30}
    html = render_trends(points)
    assert html.count('<rect class="cell') == 3 and html.count('<rect class="bar') == 3


@pytest.mark.spark
def test_stored_runs_give_the_newest_runs_whole(spark, tmp_path: Path) -> None:
    """``load_trends`` over a real results table: the newest ``last`` runs, every row of
    each (two rules per run; two runs share a time and are told by their ids)."""
    from pipelines.config import load_config
    from pipelines.lake.tables import QUALITY_RESULTS, Lake
    from pipelines.quality.trends import load_trends

    cfg = load_config(env={}, overrides={"lake.root": str(tmp_path / "lake")})
    t = dt.datetime(2026, 1, 1)
    times = [t + dt.timedelta(hours=h) for h in (0, 1, 2, 2, 3)]
    rows = [(f"r{i}", at, rule, "silver", 10, 0, "fail", "passed", None, None, "all", i, None)
            for i, at in enumerate(times) for rule in ("a", "b")]
    Lake.of(cfg).append(spark.createDataFrame(rows, QUALITY_RESULTS.ddl()), QUALITY_RESULTS)
    points = load_trends(spark, cfg, last=3)
    assert [p.run_id for p in points] == ["r2", "r3", "r4"]
    assert all(sorted(p.statuses) == [("a", "silver"), ("b", "silver")] for p in points)
    assert [p.run_id for p in load_trends(spark, cfg, last=2)] == ["r3", "r4"]
    assert len(load_trends(spark, cfg)) == 5


def test_report_trends_render_in_headless_chromium(spark, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from pipelines.cli.main import main

    lake = tmp_path / "lake"
    assert main(["--lake", str(lake), "index", "--binlog-dir",
                 str(ROOT / "samples" / "binlogs"), "--all"]) == 0  # run 1: default rules
    rules = tmp_path / "rules.toml"
    rules.write_text(FAILING_RULES)
    assert main(["--lake", str(lake), "quality", "--window", "all",
                 "--rules", str(rules)]) != 0  # run 2: a failing rule
    assert main(["--lake", str(lake), "quality", "--window", "all"]) == 0  # run 3
    report = lake / "quality" / "report.html"

    profile = tmp_path / "chromium-profile"
    dom = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                          "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    rules_svg = re.search(r'<svg class="trend rules-trend".*?</svg>', html, re.S).group(0)
    rows_svg = re.search(r'<svg class="trend rows-trend".*?</svg>', html, re.S).group(0)
    cells = re.findall(r'<rect class="cell (\w+)"', rules_svg)
    rule_rows = len(re.findall(r'<text[^>]*text-anchor="end"', rules_svg))
    assert len(cells) == 3 * rule_rows and rule_rows >= 6
    # run 2 checked 3 rules (one passed, one warned, one failed; the last two absent from
    # runs 1 and 3); runs 1 and 3 all the others
    assert cells.count("warned") == 1 and cells.count("failed") == 1
    assert cells.count("none") == (rule_rows - 3) + 2 * 2
    assert cells.count("passed") == 2 * (rule_rows - 2) + 1
    assert "never_true (silver)" in rules_svg and "no_deletes (silver)" in rules_svg
    assert len(re.findall(r'<rect class="bar silver"', rows_svg)) == 3

    shot = tmp_path / "report.png"
    run = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                          f"--screenshot={shot}", "--window-size=1400,2400", report.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB"))

    def count(colour: str) -> int:
        return int(np.all(pixels == _rgb(colour), axis=-1).sum())

    n_passed = count(STATUS_COLOURS["passed"])
    # each 14x14 cell paints ~12x12 pixels of its colour inside the stroke; legend pills alone
    # would be far fewer
    assert n_passed >= cells.count("passed") * 100, n_passed
    assert count(STATUS_COLOURS["warned"]) >= 100
    assert count(STATUS_COLOURS["failed"]) >= 100
    # the rows-checked bars: three full-height silver bars (76 x 14 pixels each), far more
    # than the legend's pill
    assert count(DATASET_COLOURS["silver"]) >= 3 * 14 * 70


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]
