"""``silver/column_defaults``: the value ADD COLUMN gives existing rows, against the server.

Each definition is added to a one-row table of a real MariaDB; the server's own
``CAST(c AS CHAR)`` of that row is the expected text (what the decoder writes for the same
value: ``mariadb-binlog -v`` prints the same digits). Definitions whose value is not derived
must say why; the end-to-end derivation runs in ``test_derived.py`` and the random workload."""

from __future__ import annotations

import json
import re

import pytest

from devtools.mariadb import MariaDBServer
from pipelines.silver.column_defaults import Underived, existing_rows_value

DERIVED = [
    "INT NOT NULL DEFAULT 7", "INT DEFAULT '-3'", "BIGINT UNSIGNED NOT NULL", "TINYINT(1) DEFAULT TRUE",
    "BOOLEAN NOT NULL DEFAULT FALSE", "YEAR NOT NULL DEFAULT 2024", "YEAR NOT NULL",
    "DECIMAL(6,2) NOT NULL DEFAULT 1.555", "DECIMAL(6,2) DEFAULT '-0.004'", "DECIMAL(10) NOT NULL",
    "NUMERIC(8,3) DEFAULT 12", "DECIMAL(5,1) DEFAULT -2.25",
    "DATE NOT NULL DEFAULT '2024-02-29'", "DATE NOT NULL",
    "DATETIME(3) DEFAULT '2024-01-01 10:00:00.5'", "DATETIME NOT NULL DEFAULT '1999-12-31 23:59:59'",
    "DATETIME(6) NOT NULL",
    "DATETIME DEFAULT '2020-01-01'", "DATETIME(2) NOT NULL DEFAULT '2020-01-01'", "TIME(2) DEFAULT '-01:02:03.4'", "TIME NOT NULL DEFAULT '838:59:59'",
    "VARCHAR(10) DEFAULT 'w''eb'", "CHAR(5) NOT NULL DEFAULT 'ab  '", "CHAR(3) NOT NULL",
    "VARCHAR(8) CHARACTER SET utf8mb4 DEFAULT 'é\\\\x'", "TEXT DEFAULT 'long ago'",
    "ENUM('small','Large') NOT NULL DEFAULT 'large'", "ENUM('x','y') NOT NULL",
    "INT NULL", "VARCHAR(4) DEFAULT NULL", "DATE NULL COMMENT 'DEFAULT 5'",
    "INT NOT NULL DEFAULT 4 INVISIBLE",
]
UNDERIVED = [
    ("DATETIME(1) DEFAULT '2024-01-01 10:00:00.55'", "more fractional digits"),
    ("TIMESTAMP NOT NULL DEFAULT '2024-01-01 00:00:00'", "time zone"),
    ("DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP", "an expression"),
    ("DOUBLE NOT NULL DEFAULT 1.5", "DOUBLE"),
    ("INT NOT NULL DEFAULT (1 + 2)", "an expression"),
    ("BIGINT AS (1) STORED", "generated"),
    ("SET('a','b') NOT NULL DEFAULT 'a'", "SET"),
]


def _split(definition: str) -> tuple[str, str]:
    m = re.match(r"([a-z]+)\b(.*)$", definition, re.I | re.S)
    return m.group(1), m.group(2)


@pytest.mark.mariadb
def test_existing_rows_get_the_servers_value():
    with MariaDBServer() as server, server.connect() as conn:
        cur = conn.cursor()
        cur.execute("CREATE DATABASE cd")
        cur.execute("CREATE TABLE cd.t (id INT PRIMARY KEY) DEFAULT CHARSET=utf8mb4")
        cur.execute("INSERT INTO cd.t VALUES (1)")
        for i, definition in enumerate(DERIVED):
            cur.execute(f"ALTER TABLE cd.t ADD COLUMN c{i} {definition}")
            cur.execute(f"SELECT CAST(c{i} AS CHAR) FROM cd.t")
            want = cur.fetchone()[0]
            got = existing_rows_value(*_split(definition))
            assert not isinstance(got, Underived), (definition, got)
            if got is None or want is None:
                assert got is None and want is None, definition
                continue
            value = json.loads(got)
            # numbers are JSON numbers (the server prints the zero YEAR as 0000)
            assert (value == int(want) if isinstance(value, int) else value == want), (
                definition, value, want)
        for i, (definition, why) in enumerate(UNDERIVED):
            cur.execute(f"ALTER TABLE cd.t ADD COLUMN u{i} {definition}")  # the server takes it
            got = existing_rows_value(*_split(definition))
            assert isinstance(got, Underived) and why in got.reason, (definition, got)
