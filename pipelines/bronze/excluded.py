"""The schemas whose events bronze leaves out: ``source.exclude_schemas``, and gold's own
database when gold lives on the source server.

Gold's export writes every silver row change into ``binlog_events`` of its database. When
that database is on the server whose binlogs binlake indexes, the server binlogs those writes
too, and the next run would index them: mirror tables of ``binlake.*``, and a gold row for
every gold row, without end. So gold's database is left out of indexing when it is known to
be the source's server (``gold.dsn`` and ``source.dsn`` name the same host and port; a loopback
name is one host), or when ``source.exclude_schemas`` names it (binlogs read from files, where
binlake cannot tell which server wrote them). Nothing is guessed from names alone: a source
schema that merely shares gold's database name on another server is indexed.

An excluded event is one whose ``schema_name`` is excluded (its rows events, through their
TABLE_MAP, and the statements run with it as the default database); the files' closing rows
stay, so a file's state is as for any other file. ``drop_schemas`` is pure (Arrow in, Arrow
out); file mode applies it in the decoding task, the stream before its commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.errors import ConfigError
from pipelines.mysql.dsn import Dsn, database_of

if TYPE_CHECKING:
    from pipelines.config import Config

__all__ = ["excluded_schemas", "same_server", "gold_on_source", "feedback_warning",
           "drop_schemas"]

_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}


def _host(name: str) -> str:
    name = name.strip("[]").lower()
    return "loopback" if name in _LOOPBACK else name


def same_server(a: Dsn, b: Dsn) -> bool:
    """Whether two DSNs name one server (host and port; the loopback names are one host)."""
    return _host(a.host) == _host(b.host) and a.port == b.port


def gold_on_source(cfg: "Config", gold_dsn: str | None = None) -> str | None:
    """Gold's database name when gold (``gold_dsn``, else ``gold.dsn``) and ``source.dsn`` name
    one server, else None."""
    gold_dsn = gold_dsn or cfg.gold.dsn
    if not gold_dsn or not cfg.source.dsn:
        return None
    try:
        gold = Dsn.parse(gold_dsn, setting="gold.dsn")
        source = Dsn.parse(cfg.source.dsn, setting="source.dsn")
    except ConfigError:
        return None  # the command that connects says what is wrong with it
    return database_of(gold) if same_server(gold, source) else None


def excluded_schemas(cfg: "Config") -> frozenset[str]:
    """``source.exclude_schemas`` (comma-separated) and :func:`gold_on_source`'s database."""
    names = {s.strip() for s in cfg.source.exclude_schemas.split(",") if s.strip()}
    gold = gold_on_source(cfg)
    if gold:
        names.add(gold)
    return frozenset(names)


def feedback_warning(cfg: "Config", gold_dsn: str | None = None,
                     silver_schemas: set[str] | None = None) -> str | None:
    """What ``init`` and ``gold`` warn: gold is on the source server (its database is left
    out of indexing), or silver already holds row changes of gold's database (binlogs read from
    files: binlake cannot tell the server; ``source.exclude_schemas`` leaves it out)."""
    on_source = gold_on_source(cfg, gold_dsn)
    if on_source:
        src = Dsn.parse(cfg.source.dsn, setting="source.dsn")
        return (f"warning: gold's database {on_source!r} is on the source server "
                f"({src.host}:{src.port}): the server binlogs gold's writes; indexing "
                f"leaves {on_source!r} out")
    url = gold_dsn or cfg.gold.dsn
    if not url or not silver_schemas:
        return None
    try:
        db = database_of(Dsn.parse(url, setting="gold.dsn"))
    except ConfigError:
        return None
    if db in silver_schemas and db not in excluded_schemas(cfg):
        return (f"warning: silver holds row changes of {db!r}, gold's own database: gold "
                "writes to the server whose binlogs are indexed; set source.exclude_schemas "
                f"= \"{db}\" (or source.dsn) to leave them out")
    return None


def drop_schemas(batch: pa.RecordBatch, excluded: frozenset[str]) -> pa.RecordBatch:
    """``batch`` without the rows whose ``schema_name`` is in ``excluded`` (the same batch
    when there are none)."""
    if not excluded or batch.num_rows == 0:
        return batch
    names = batch.column(batch.schema.get_field_index("schema_name"))
    hit = pc.fill_null(pc.is_in(names, value_set=pa.array(sorted(excluded), names.type)), False)
    if not pc.any(hit).as_py():
        return batch
    return batch.filter(pc.invert(hit))
