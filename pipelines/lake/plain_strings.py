"""String columns reach every lake table as plain ``string``, whatever engine writes them.

Spark 4.2's Connect server takes the ``StringType`` a client sends inside a plan (the return
schema of ``mapInArrow``, a cast to a type object) as an explicitly collated string: pyspark's
Connect client (4.1 and 4.2) names the collation, ``UTF8_BINARY``, in every string type it
sends. Delta 4.4 then writes ``"string collate UTF8_BINARY"`` into the table's schema, which
Sail 0.7, delta-rs and Spark before 4.2 cannot parse (Sail: "data did not match any variant
of untagged enum DataType"). A table that such a write creates is unreadable to them: bronze
(its first commit is the decoders' ``mapInArrow`` output), and silver's quarantine (bronze's
columns, read back collated). Appends to an existing table keep its schema.

:func:`plain_strings` casts a DataFrame's declared string columns (arrays of strings too) to
their declared SQL type, given as text (``CAST(c AS STRING)``: the server parses the type and
gets the plain one). Only where the engine collates the strings it is sent
(:func:`collates_sent_strings`, asked once per session): the plans of the other engines stay
as they are.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from pipelines.lake.delta_ops import session_key
from pipelines.vocabulary import quote_ident

__all__ = ["plain_strings", "string_casts", "collates_sent_strings", "is_collated"]

_STRING = re.compile(r"\bstring\b", re.IGNORECASE)
_ANSWERS: dict[Any, bool] = {}


def string_casts(names: Sequence[str], columns: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Of the DataFrame columns ``names``, those ``columns`` (``(name, SQL type)``) give a
    type holding a string, each with that type: what :func:`plain_strings` casts."""
    declared = dict(columns)
    return {n: declared[n] for n in names if n in declared and _STRING.search(declared[n])}


def is_collated(type_name: str) -> bool:
    """Whether an engine's name of a type (``typeof``) carries a collation."""
    return " collate " in type_name.lower()


def _is_connect(spark) -> bool:
    """A Spark Connect session (Sail, a Connect server); classic pyspark sends types as JSON,
    which parses to the plain string."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def collates_sent_strings(spark) -> bool:
    """Whether the engine makes a collated string of a ``StringType`` the client sends: asked
    once per session by the type the engine names for a cast to one (``typeof``); ``False``
    on classic sessions and where the engine cannot answer."""
    key = session_key(spark)
    if key not in _ANSWERS:
        _ANSWERS[key] = _is_connect(spark) and _probe(spark)
    return _ANSWERS[key]


def _probe(spark) -> bool:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    try:
        row = spark.range(1).select(F.typeof(F.lit("").cast(StringType()))).first()
    except Exception:  # noqa: BLE001 - an engine without typeof: nothing to normalise known
        return False
    return bool(row) and is_collated(str(row[0]))


def plain_strings(df, columns: Sequence[tuple[str, str]] | None = None):
    """``df`` with its string columns cast to their declared types (``columns``; without
    them, the types pyspark names for ``df``'s, plain ``string`` for a UTF8_BINARY one) where
    the engine collates the strings it is sent; else ``df`` itself."""
    if not collates_sent_strings(df.sparkSession):
        return df
    if columns is None:
        columns = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    casts = string_casts(df.columns, columns)
    if not casts:
        return df
    return df.withColumns({n: df[quote_ident(n)].cast(t) for n, t in casts.items()})
