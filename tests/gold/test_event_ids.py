"""gold's ``event_id`` layout (pipelines/gold/event_ids.py), without a server: ids ascend
with (file number, start_pos, row_in_event) within a source, never meet across sources,
and a row outside the layout's bounds raises instead of being renumbered."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelines.errors import EventIdError
from pipelines.gold.event_ids import (FIRST_ID, MAX_SOURCES, binlog_base, event_id, event_id_sql,
                                      event_ids, source_numbers)

# (file, start_pos, end_pos, row_in_event), in binlog order
ORDERED = [
    ("mysql-bin.000001", 4, 120, 0),
    ("mysql-bin.000001", 4, 120, 1),
    ("mysql-bin.000001", 4, 120, 115 * 256),  # 256 rows a byte: a compressed payload
    ("mysql-bin.000001", 120, 200, 0),
    ("mysql-bin.000002", 4, 50, 0),
    ("mysql-bin.999999", 4, 50, 0),
    ("mysql-bin.1000000", 4, 50, 0),  # past six digits: by number, not by text
    ("mysql-bin.1000000", 2**32 - 100, 2**32 - 1, 7),
]


def test_ids_ascend_in_binlog_order_and_sources_never_meet() -> None:
    for source in (1, 2, MAX_SOURCES):
        ids = [event_id(source, *row) for row in ORDERED]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert all(FIRST_ID <= i < 2**63 for i in ids)
    assert event_id(1, *ORDERED[-1]) < event_id(2, *ORDERED[0])


@pytest.mark.parametrize("source, row, what", [
    (0, ("mysql-bin.000001", 4, 120, 0), "source number 0"),
    (MAX_SOURCES + 1, ("mysql-bin.000001", 4, 120, 0), "source number 8"),
    (1, ("mysql-bin.1048576", 4, 120, 0), "mysql-bin.1048576:4"),
    (1, ("mysql-bin.000001", 2**32, 2**32 + 10, 0), "row 0"),
    (1, ("mysql-bin.000001", 4, 120, 116 * 256), "row 29696 (end_pos 120"),
])
def test_rows_outside_the_layout_raise(source, row, what) -> None:
    with pytest.raises(EventIdError, match=what.replace("(", r"\(")):
        event_id(source, *row)


def test_the_sql_form_computes_the_same_ids() -> None:
    """event_id_sql on MariaDB's integer arithmetic, evaluated here as Python ints."""
    sql = event_id_sql("1")
    assert "<< 20" in sql and "<< 32" in sql and "<< 8" in sql
    files = pa.array([r[0] for r in ORDERED])
    ids = event_ids(files, pa.array([r[1] for r in ORDERED]), pa.array([r[2] for r in ORDERED]),
                    pa.array([r[3] for r in ORDERED]), pa.array([1] * len(ORDERED)))
    assert ids.to_pylist() == [event_id(1, *r) for r in ORDERED]


def test_a_source_number_names_a_source_and_its_binlog_base_name() -> None:
    """mysql-bin.000042 and relay-bin.000042 of one source would share every id: each base
    name has a number of its own; without numbers only one (source, base) may come."""
    sids = pa.array(["default", None, "default", "eu"])
    files = pa.array(["mysql-bin.000042", "mysql-bin.000001", "relay-bin.000042",
                      "mysql-bin.000042"])
    numbers = {("default", "mysql-bin"): 1, ("default", "relay-bin"): 2, ("eu", "mysql-bin"): 3}
    assert source_numbers(sids, files, numbers).to_pylist() == [1, 1, 2, 3]
    assert [binlog_base(f) for f in ("a.b.000001", "mysql-bin", "x.7")] == ["a.b", "mysql-bin", "x"]
    with pytest.raises(EventIdError, match="3 sources/binlog names"):
        source_numbers(sids, files, None)
    with pytest.raises(EventIdError, match="'eu' with binlogs 'mysql-bin' has no number"):
        source_numbers(sids, files, {k: v for k, v in numbers.items() if k[0] != "eu"})
    assert source_numbers(sids.slice(0, 2), files.slice(0, 2), None).to_pylist() == [1, 1]
