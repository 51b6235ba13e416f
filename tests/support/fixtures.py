"""Pytest fixtures around :class:`~devtools.mariadb.MariaDBServer`.

Import with ``from tests.support.fixtures import *`` in a conftest. ``mariadb`` is one server
per test session (``binlog_row_metadata=FULL``); tests that need other binlog settings start
their own :class:`MariaDBServer` in a ``with`` block. Without MariaDB installed the fixture
fails (``make test`` installs it first): a missing server never hides as a skip.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from devtools.mariadb import MariaDBServer, mariadb_available

__all__ = ["mariadb"]


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    """A running MariaDB 10.11 server with ROW binlogs and FULL row metadata."""
    if not mariadb_available():
        pytest.fail("MariaDB server not installed (run `make mariadb`; `make test` does)")
    with MariaDBServer(binlog_row_metadata="FULL") as server:
        yield server
