"""Writing a :class:`~pipelines.history.reconstruct.Reconstruction`: jsonl, csv, SQL, Delta.

Rows stream from the engine (``toLocalIterator``), so memory holds one partition at a time.
jsonl prints each row's image (values in silver's forms, ``docs/types.md``); csv prints the
values as text (strings unquoted, JSON as its text, NULL as an empty field); sql prints
``INSERT`` statements whose literals the server reads back exactly (``images.sql_literal``);
a Delta table has one string column per column holding the csv form (NULL as NULL).
"""

from __future__ import annotations

import csv
import json
from typing import Iterator, TextIO

import pyarrow as pa

from pipelines.history.images import SCRIPT_PREAMBLE, sql_literal
from pipelines.lake.plain_strings import plain_strings
from pipelines.silver.image_values import raw_values
from pipelines.vocabulary import quote_ident

__all__ = ["write_rows", "write_delta", "text_value"]


def text_value(raw: str | None) -> str | None:
    """A silver JSON value as plain text: strings unquoted, NULL as None."""
    if raw is None or raw == "null":
        return None
    return json.loads(raw) if raw.startswith('"') else raw


def _images(rec) -> Iterator[str]:
    for r in rec.images.select("image").toLocalIterator():
        yield r["image"]


def write_rows(rec, fmt: str, out: TextIO, generated: frozenset[str] = frozenset()) -> int:
    """Print the rows in ``fmt`` (jsonl|csv|sql; sql leaves ``generated`` columns to the
    server); return how many."""
    n = 0
    if fmt == "jsonl":
        for image in _images(rec):
            out.write(image + "\n")
            n += 1
        return n
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(rec.columns)
        for image in _images(rec):
            values = raw_values(image) or {}
            w.writerow(["" if (v := text_value(values.get(c))) is None else v
                        for c in rec.columns])
            n += 1
        return n
    if rec.spec is None:
        raise ValueError("no column types known for SQL output")
    ref = f"{quote_ident(rec.schema)}.{quote_ident(rec.table)}"
    names = [c for c in rec.columns if c not in generated]
    cols = ", ".join(quote_ident(c) for c in names)
    out.write(SCRIPT_PREAMBLE)
    by_name = {c.name: c for c in rec.spec.columns}
    for image in _images(rec):
        values = raw_values(image) or {}
        out.write(f"INSERT INTO {ref} ({cols}) VALUES ("
                  + ", ".join(sql_literal(by_name[c], values.get(c)) for c in names)
                  + ");\n")
        n += 1
    return n


def write_delta(rec, path: str) -> int:
    """Overwrite a Delta table at ``path`` with the rows (string columns); return the count."""
    columns = list(rec.columns)
    schema = pa.schema([(c, pa.string()) for c in columns])

    def split(batches):
        for batch in batches:
            rows = [raw_values(img) or {} for img in batch.column("image").to_pylist()]
            yield pa.RecordBatch.from_pydict(
                {c: [text_value(r.get(c)) for r in rows] for c in columns}, schema=schema)

    ddl = ", ".join(f"{quote_ident(c)} string" for c in columns)
    # Plain `string` in the table's schema on Spark 4.2 Connect too (lake/plain_strings.py).
    df = plain_strings(rec.images.select("image").mapInArrow(split, ddl),
                       [(c, "string") for c in columns])
    df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    return rec.images.count()
