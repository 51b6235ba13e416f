"""A decoding worker's batches cross to its task as an Arrow IPC stream on a pipe
(``decode_task._forked``): they arrive as the task's own decoding makes them, and a worker
killed mid-stream ends its chunk with the ERROR row, the batches before it kept.

A real corpus binlog (MariaDB, 17,727 bronze rows) in small batches, so that its stream
(~6.6 MB) is several times what the pipe holds: the worker is still writing when it is killed.
"""

from __future__ import annotations

import json
import os
import signal
from multiprocessing import forkserver as fs

import pyarrow as pa

from pipelines.bronze.decode_task import decode_file_batches
from pipelines.bronze.records import BRONZE_SCHEMA
from tests.conftest import CORPUS

BINLOG = (CORPUS / "mariadb-operator__mariadb-poc"
          / "mariadb-binlog__binlogs__domain_id_0__mariadb-repl-bin.000002")


def _batches(subprocess: bool, batch_rows: int = 50):
    return decode_file_batches(str(BINLOG), source_id="s", batch_rows=batch_rows,
                               subprocess=subprocess, columnar=False)


def _workers() -> list[int]:
    server = fs._forkserver._forkserver_pid
    with open(f"/proc/{server}/task/{server}/children") as f:
        return [int(p) for p in f.read().split()]


def test_a_workers_batches_equal_the_tasks_own_decoding() -> None:
    here = pa.Table.from_batches(list(_batches(subprocess=False)), BRONZE_SCHEMA)
    there = pa.Table.from_batches(list(_batches(subprocess=True)), BRONZE_SCHEMA)
    assert there.num_rows == here.num_rows == 17_727  # row changes, maps, DDL and the END
    assert there.column("event_type")[-1].as_py() == "END"
    assert there.equals(here)


def test_a_worker_killed_mid_stream_ends_its_chunk_with_the_error_row() -> None:
    whole = sum(b.num_rows for b in _batches(subprocess=False))
    got = _batches(subprocess=True)
    first = next(got)
    killed = _workers()
    assert killed, "no decoding worker running after the first batch"
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    rest = list(got)
    rows = first.num_rows + sum(b.num_rows for b in rest)
    last = rest[-1].to_pylist()[-1]
    assert last["event_type"] == "ERROR"
    assert json.loads(last["query"])["error"] == (
        "decoder process exited with code -9 before the end")
    assert rows < whole  # the rows decoded before the kill, then the ERROR row
    assert all(r["event_type"] != "END" for b in rest for r in b.to_pylist())
    # the state says exactly which positions are in: up to the end of the last event
    # delivered (a batch ends at an event's end), not "pos 0"
    delivered = [r for b in [first, *rest] for r in b.to_pylist()][:-1]
    through = max(r["end_pos"] for r in delivered)
    assert last["start_pos"] == through == json.loads(last["query"])["rows_through"]
    assert through > 4
