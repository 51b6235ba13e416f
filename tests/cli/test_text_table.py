"""What ``binlake sql`` prints, checked as text (``history/text_table.py``, ``cli/sql.py``):
a cut cell ends in ``…``, a table says how many rows it left out, ``--format csv|jsonl``
carry whole values (their note on stderr), ``--limit`` caps any format. One copy of the
formatting: ``binlake query`` and the shell print through the same functions."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from pipelines.cli.main import main
from pipelines.history.text_table import fit, json_text, rows_line, write_rows

ROOT = Path(__file__).resolve().parents[2]


def test_fit_marks_a_cut_cell_and_keeps_a_cell_on_one_line() -> None:
    assert fit("abcdef", 6) == "abcdef"
    assert fit("abcdefg", 6) == "abcde…"
    assert fit("a\nb\tc", None) == "a\\nb\\tc"
    assert rows_line(1) == "(1 row)"
    assert rows_line(50, 1184) == "(50 rows shown, 1184 left out: raise --limit)"
    assert rows_line(1000, None) == "(1000 rows, more not shown: raise --limit)"


def test_the_three_formats_of_one_row() -> None:
    import datetime as dt

    row = [7, None, Decimal("12.50"), b"\x00\xff", dt.datetime(2026, 11, 22, 3, 5, 28), "é,\"x\""]
    cols = ["id", "n", "price", "raw", "at", "name"]
    out = io.StringIO()
    assert write_rows(cols, [row], "jsonl", out) == 1
    assert out.getvalue() == ('{"id": 7, "n": null, "price": 12.50, "raw": "0x00ff", '
                              '"at": "2026-11-22 03:05:28", "name": "é,\\"x\\""}\n')
    assert json.loads(out.getvalue())["price"] == 12.5
    out = io.StringIO()
    write_rows(cols, [row], "csv", out)
    assert out.getvalue() == ('id,n,price,raw,at,name\n'
                              '7,,12.50,0x00ff,2026-11-22 03:05:28,"é,""x"""\n')
    out = io.StringIO()
    write_rows(cols, [row], "table", out, width=6)
    assert out.getvalue().splitlines()[3] == "| 7  | NULL | 12.50 | 0x00ff | 2026-… | é,\"x\" |"
    assert json_text("s", Decimal("1E+2")) == "1E+2"


@pytest.mark.spark
def test_structs_arrays_and_maps_print_as_json_text(spark) -> None:
    df = spark.sql("SELECT named_struct('a', 1, 'b', CAST(2.5 AS DECIMAL(3,1))) AS s, "
                   "array(1, 2) AS arr, map('k', 'v') AS m")
    out = io.StringIO()
    write_rows(df.columns, df.collect(), "csv", out)
    assert out.getvalue() == ('s,arr,m\n"{""a"": 1, ""b"": ""2.5""}","[1, 2]","{""k"": '
                              '""v""}"\n')
    out = io.StringIO()
    write_rows(df.columns, df.collect(), "jsonl", out)
    assert out.getvalue() == '{"s": {"a": 1, "b": "2.5"}, "arr": [1, 2], "m": {"k": "v"}}\n'


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    lake = str(tmp_path_factory.mktemp("sql") / "lake")
    assert main(["--lake", lake, "index", "--binlog-dir", str(ROOT / "samples" / "binlogs"),
                 "--all"]) == 0
    return lake


@pytest.mark.spark
def test_one_shot_table_marks_cut_cells_and_counts_the_rows_left_out(spark, lake: str,
                                                                    capsys) -> None:
    capsys.readouterr()
    assert main(["--lake", lake, "sql", "SELECT binlog_file, start_pos, query FROM "
                 "bronze_binlog_events WHERE query LIKE 'CREATE TABLE shop.ints%'"]) == 0
    rule = "+--------------------+-----------+" + "-" * 82 + "+"
    assert capsys.readouterr() == ("\n".join([
        rule,
        "| binlog_file        | start_pos | query" + " " * 75 + " |",
        rule,
        "| mariadb-bin.000001 | 962       | CREATE TABLE shop.ints (\\n          id INT NOT NULL"
        " PRIMARY KEY,\\n          t T… |",
        rule,
        "(1 row)"]) + "\n", "")
    # 340 row changes in silver (samples/binlogs/README.md): 50 shown by default
    assert main(["--lake", lake, "sql", "SELECT seq FROM silver_binlog_events ORDER BY seq"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "(50 rows shown, 290 left out: raise --limit)" and err == ""
    assert len(out.splitlines()) == 4 + 50 + 1
    assert main(["--lake", lake, "sql", "--limit", "2", "SELECT event_type, count(*) AS n "
                 "FROM silver_binlog_events GROUP BY 1 ORDER BY 1"]) == 0
    assert capsys.readouterr().out == ("+------------+-----+\n| event_type | n   |\n"
                                       "+------------+-----+\n| DELETE     | 20  |\n"
                                       "| INSERT     | 274 |\n+------------+-----+\n"
                                       "(2 rows shown, 1 left out: raise --limit)\n")


@pytest.mark.spark
def test_one_shot_csv_and_jsonl_carry_whole_values(spark, lake: str, capsys) -> None:
    capsys.readouterr()
    q = ("SELECT event_type, count(*) AS n FROM silver_binlog_events GROUP BY 1 ORDER BY 1")
    assert main(["--lake", lake, "sql", "--format", "csv", q]) == 0
    assert capsys.readouterr() == ("event_type,n\nDELETE,20\nINSERT,274\nUPDATE,46\n", "")
    assert main(["--lake", lake, "sql", "--format", "jsonl", "--limit", "1", q]) == 0
    assert capsys.readouterr() == ('{"event_type": "DELETE", "n": 20}\n',
                                   "sql: 1 row written, 2 left out: raise --limit\n")
    # no --limit: every row, a value of any length whole
    assert main(["--lake", lake, "sql", "--format", "jsonl", "SELECT query FROM "
                 "bronze_binlog_events WHERE event_type = 'QUERY' ORDER BY binlog_file, "
                 "start_pos"]) == 0
    out, err = capsys.readouterr()
    queries = [json.loads(line)["query"] for line in out.splitlines()]
    assert len(queries) == 13 and err == ""
    assert max(len(q) for q in queries) > 300 and "…" not in out
    assert main(["--lake", lake, "sql", "--format", "csv", "SELECT * FROM "
                 "silver_binlog_events"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 340


def test_sql_options_that_do_not_fit_are_one_line(tmp_path: Path, capsys) -> None:
    lake = str(tmp_path)
    assert main(["--lake", lake, "sql", "--limit", "0", "SELECT 1"]) == 2
    assert capsys.readouterr().err == "binlake: configuration error: --limit must be positive\n"
    assert main(["--lake", lake, "sql", "--format", "csv"]) == 2
    assert capsys.readouterr().err == ("binlake: configuration error: --format csv is for a "
                                       "one-shot query (binlake sql \"SELECT ...\"); the shell "
                                       "prints tables\n")


@pytest.mark.spark
def test_the_shell_cuts_cells_the_same_way(spark) -> None:
    from pipelines.cli.shell import Shell

    out = io.StringIO()
    assert Shell(spark, out=out, limit=2).run_sql(
        "SELECT id, repeat('x', 100) AS v FROM range(3) ORDER BY id")
    lines = out.getvalue().splitlines()
    assert lines[3] == "| 0  | " + "x" * 79 + "… |"
    assert lines[-1] == "(2 rows, more not shown: raise --limit)"
