"""Binlog file names: split, server order, file numbers (pipelines/binlog/names.py)."""

from __future__ import annotations

import pytest

from pipelines.binlog.names import binlog_order, file_number, is_binlog_file, split_binlog_name

CASES = [
    # name                    split                     is a server's binlog
    ("mysql-bin.000042",      ("mysql-bin", 42),        True),
    ("mariadb-bin.1000000",   ("mariadb-bin", 1000000), True),   # past 999999: 7 digits
    ("host.example.000001",   ("host.example", 1),      True),   # dots in the base
    ("mysql-bin.index",       None,                     False),
    ("mysql-bin.42",          ("mysql-bin", 42),        False),  # servers write six digits
    (".000001",               ("", 1),                  False),  # no base
    ("",                      None,                     False),
]


@pytest.mark.parametrize("name,split,binlog", CASES)
def test_names(name: str, split, binlog: bool) -> None:
    assert split_binlog_name(name) == split
    assert is_binlog_file(name) is binlog
    assert file_number(name) == (split[1] if split else 0)


def test_server_order_is_numeric_not_textual() -> None:
    names = ["b.000010", "a.000002", "b.1000000", "b.000009", "b.index"]
    assert sorted(names, key=binlog_order) == ["a.000002", "b.000009", "b.000010", "b.1000000",
                                               "b.index"]
