"""bench/workload.py's workloads against a real MariaDB: the row changes each says it wrote are
the row changes its binlog holds, as ``mariadb-binlog -v`` prints them (the benchmarks divide
by that count), and the narrow workload has issue 13's shape (one 8-column table, ~1.3 row
images a row change)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.support.binlog_verbose import run_mariadb_binlog

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from workload import WORKLOADS  # noqa: E402


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_workload_writes_the_row_changes_it_counts(mariadb, name: str) -> None:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:  # a binlog of the workload's own: the shared server's
            cur.execute("FLUSH BINARY LOGS")  # earlier tests wrote into the current one
        binlog, written = WORKLOADS[name](conn, 400_000)
    finally:
        conn.close()
    text = run_mariadb_binlog(mariadb.binlog_dir / binlog).decode("utf-8", "surrogateescape")
    kinds = re.findall(r"^### (INSERT INTO|UPDATE|DELETE FROM) ", text, re.M)
    assert written.row_changes > 1000
    assert (kinds.count("INSERT INTO"), kinds.count("UPDATE"), kinds.count("DELETE FROM")) == \
        (written.inserts, written.updates, written.deletes)
    if name == "narrow":
        tables = set(re.findall(r"^### (?:INSERT INTO|UPDATE|DELETE FROM) (\S+)", text, re.M))
        assert tables == {"`benchdb`.`payments`"}
        images = written.inserts + 2 * written.updates + written.deletes
        assert 1.2 < images / written.row_changes < 1.4  # the 1.35 M / 1.05 M
