"""A JSON column's text cut out of each silver image by the engine, so the records' Arrow
path (``columns.image_columns``) parses only that document in Python, not the whole image.

The mirror holds a JSON column as the text :func:`~pipelines.mirror.types.json_text` makes of
the document parsed out of the image. Python's parse of the whole image was three quarters
of the records' typing of a table with one JSON column (docs/performance.md). An engine whose
``get_json_object`` gives an object's or array's text exactly as the image holds it (Sail:
spacing, ``1.10``, ``1E400``, ``\\u00e9`` kept) hands over that span; the document parsed
from it is the one parsed from the whole image. Where the engine rewrites it (JVM Spark's
compact text) the probe says no and nothing is cut. ``columns`` checks each span again (an
object or array, found in the image right after the column's key) and parses the whole image
of any row whose span is missing or does not check.

Only columns named by a plain identifier: the engines' JSON paths (``$.name``) have no
quoting that every engine reads.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from pipelines.lake.delta_ops import session_key

__all__ = ["SPAN_PREFIX", "span_columns", "span_exprs", "spans_exact"]

SPAN_PREFIX = ("__span_b", "__span_a")  # input columns: the before image's, the after's
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PROBE = '{"k": 1.10, "b": [1E400, "\\u00e9", {"n": null}],  "s": "x,  y"}'
_ANSWERS: dict[Any, bool] = {}


def spans_exact(spark) -> bool:
    """Whether the engine's ``get_json_object`` gives a member's object text as the image
    holds it: asked once per session (``False`` where it cannot answer)."""
    key = session_key(spark)
    if key not in _ANSWERS:
        _ANSWERS[key] = _probe(spark)
    return _ANSWERS[key]


def _probe(spark) -> bool:
    from pyspark.sql import functions as F

    image = '{"id": 1, "doc": ' + _PROBE + ', "n": null}'
    try:
        row = spark.range(1).select(F.get_json_object(F.lit(image), "$.doc")).first()
    except Exception:  # noqa: BLE001 - an engine without it: nothing is cut
        return False
    return bool(row) and row[0] == _PROBE


def span_columns(names: list[str]) -> dict[str, int]:
    """Of the JSON columns ``names``, those whose span can be cut, each with its number in
    the span input columns (``SPAN_PREFIX`` + number)."""
    return {n: i for i, n in enumerate(n for n in names if _NAME.match(n))}


def span_exprs(spans: dict[str, int], key: Iterable[str]) -> list:
    """The input columns cutting ``spans``' texts out of ``row_after``, and out of
    ``row_before`` for the columns of the table's ``key`` (a close converts its key alone)."""
    from pyspark.sql import functions as F

    key = set(key)
    return [F.get_json_object(F.col(image), f"$.{name}").alias(f"{prefix}{i}")
            for name, i in spans.items()
            for prefix, image in zip(SPAN_PREFIX, ("row_before", "row_after"))
            if image == "row_after" or name in key]
