"""``make demo``: index the shipped sample binlogs end to end on the embedded engine.

``binlake index`` runs bronze (decode), silver (named row images; the samples carry their
column names, ``binlog_row_metadata=FULL``) and the data-quality rules.

Reads ``samples/binlogs`` (made by a real MariaDB 10.11 with ``scripts/make_sample_binlog.py``),
writes a fresh lake under ``./lake/demo`` (or ``--lake``), prints what each stage did, the
status, and a sample query of the result.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Sequence

from pipelines.cli.main import main as cli_main
from pipelines.vocabulary import CHANGE_TYPES_SQL

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "binlogs"

SAMPLE_QUERY = (
    "SELECT schema_name, table_name, event_type, count(*) AS row_changes, "
    "min(event_timestamp) AS first_change "
    f"FROM bronze_binlog_events WHERE event_type IN {CHANGE_TYPES_SQL} "
    "GROUP BY schema_name, table_name, event_type ORDER BY schema_name, table_name, event_type"
)
SILVER_QUERY = (
    "SELECT seq, event_type, pk_values, changed_columns, row_after FROM silver_binlog_events "
    "WHERE schema_name = 'shop' AND table_name = 'orders' AND pk_values = '7' ORDER BY seq"
)
SAMPLE_ROW_QUERY = (
    "SELECT binlog_file, start_pos, row_in_event, gtid, event_type, table_name, "
    "transform(row_after, v -> CAST(v AS STRING)) AS row_after "
    "FROM bronze_binlog_events WHERE table_name = 'ints' ORDER BY binlog_file, start_pos, row_in_event"
)


def _shell_words(cmd: Sequence[str]) -> str:
    """``cmd`` as one would type it (the SQL in double quotes: it holds single quotes)."""
    return " ".join(a if re.fullmatch(r"[\w./:=,@+-]+", a) else
                    (f'"{a}"' if '"' not in a and "$" not in a and "`" not in a else shlex.quote(a))
                    for a in cmd)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipelines.cli.demo", description=__doc__)
    ap.add_argument("--lake", default="lake/demo")
    args = ap.parse_args(argv)
    if os.path.isdir(args.lake):
        shutil.rmtree(args.lake)
    steps = [
        ("index the sample binlogs", ["index", "--binlog-dir", str(SAMPLES), "--all"]),
        ("status", ["status"]),
        ("row changes per table (SQL on the bronze Delta table)", ["sql", SAMPLE_QUERY]),
        ("bronze rows of shop.ints (positional raw values)", ["sql", SAMPLE_ROW_QUERY, "--limit", "8"]),
        ("silver: the history of order 7 (named JSON images)", ["sql", SILVER_QUERY]),
    ]
    for title, cmd in steps:
        print(f"\n== {title}:\n$ binlake --lake {args.lake} {_shell_words(cmd)}", flush=True)
        code = cli_main(["--lake", args.lake, *cmd])
        if code:
            return code
    print(f"\nDone. The lake is in {args.lake}/; try: .venv/bin/binlake --lake {args.lake} "
          "sql \"SELECT * FROM bronze_files\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
