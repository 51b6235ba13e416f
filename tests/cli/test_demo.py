"""``make demo`` (``python -m pipelines.cli.demo``): it indexes the shipped samples and prints
their figures. The counts are the samples' own (``samples/binlogs/README.md``, written from
``mariadb-binlog -vv`` of the same files): 340 row changes."""

from __future__ import annotations

import pytest

from pipelines.cli import demo

pytestmark = [pytest.mark.spark]


def test_the_demo_indexes_the_shipped_samples(tmp_path, capsys):
    assert (demo.SAMPLES / "expected_tables.json").is_file()  # the checkout's samples
    assert demo.main(["--lake", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "340 row changes" in out, out[-2000:]
