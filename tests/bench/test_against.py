"""``bench/against.py``'s pure parts: the stage seconds read from a bench script's table, and
the side-by-side comparison (a real ``bench/pipeline.py`` table, narrow 60 MB)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from against import side_by_side, stage_seconds  # noqa: E402

OUTPUT = """\
  silver, derivation off: 420,700 rows in 2.02 s (207,871/s), peak PSS 724 MiB

| stage | seconds | row changes/s | ratio to reference | paired ratio per round: median (min–max) | peak memory (tree) | cores busy | load |
|---|---:|---:|---|---|---:|---:|---:|
| bronze | 2.32 | 181,547 | — | — | 675 MiB | 0.77 | 4.5 |
| silver | 1.74 | 241,836 | 1.33x bronze | 1.24x (0.98–1.33) | 685 MiB | 0.87 | 4.6 |
| silver, derivation off | 1.83 | 229,632 | 0.95x silver | 0.97x (0.88–1.44) | 672 MiB | 0.82 | 4.5 |

| other | table |
|---|---|
| x | y |
"""


def test_stage_seconds_reads_the_seconds_column_only():
    assert stage_seconds(OUTPUT) == {"bronze": 2.32, "silver": 1.74,
                                     "silver, derivation off": 1.83}
    assert stage_seconds("no table here\n") == {}


def test_side_by_side_pairs_runs_and_marks_missing_stages():
    base = [{"bronze": 2.0, "silver": 1.0}, {"bronze": 2.5, "silver": 1.5}]
    here = [{"bronze": 2.2, "silver": 1.1, "new": 3.0}, {"bronze": 2.0, "silver": 0.9}]
    assert side_by_side("abc", base, here).splitlines() == [
        "| stage | abc best s | this checkout best s | this / abc | paired: median (min–max) |",
        "|---|---:|---:|---:|---|",
        "| bronze | 2.00 | 2.00 | 1.00x | 0.95x (0.80–1.10) |",
        "| silver | 1.00 | 0.90 | 0.90x | 0.85x (0.60–1.10) |",
        "| new | - | 3.00 | - | - |"]
