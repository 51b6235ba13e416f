"""A JSON column's text cut out of the images by the engine (``mirror/json_spans.py``): the
records made with the spans the real engine cuts equal the reference's (the per-value
converters on the whole image), on random images whose documents are written as a user may
write them (spacing, ``1.10``, ``1E400``, escapes, strings and numbers as documents, a key
of the same name nested in another column); the spans are taken where they check."""

from __future__ import annotations

import datetime as dt
import json
import os
import random

import pyarrow as pa
import pytest

from pipelines.mirror import columns
from pipelines.mirror.json_spans import span_columns, span_exprs, spans_exact
from pipelines.mirror.plan import Layout, plan_layout, records
from tests.mirror.test_columns import _typed

# documents as a user's INSERT may spell them (silver inlines a JSON column's text as stored)
_DOCS = ['{"a":1}', '{ "a" : [1,2.50,-0.0e-7] }', '[1, "x\\u00e9", null]', '{"k": 1.10}',
         '"123"', '"s"', '7', '1.10', 'true', 'null', '{}', '[]', '[ ]', '{"c1": [1]}',
         '"{\\"a\\": 1}"', '  {"a": 1}', '{"a": 1}  ', '[[], {"": ""}]',
         '{"a": "x, \\"c1\\": [1]"}', '{"a": 1, "a": 2}', '{"b": 123456789012345678901234}',
         '{"c1": "s"}', '"\\"s\\""']  # the last two: c1's string found in c0's document
# rarer: Arrow's reader refuses the batch (a number past a double, a line break in an image)
_ODD = ['{"a": [1E400]}', '{"a":\n 1}']


def _image(rnd: random.Random, i: int, cols: list[str]) -> str:
    parts = [f'"id": {i}']
    for name in cols:
        if rnd.random() < 0.1:
            continue  # a column left out (a MINIMAL image's kind of gap)
        doc = rnd.choice(_ODD if rnd.random() < 0.003 else _DOCS)
        parts.append(f"{json.dumps(name)}: {doc}")
    return "{" + ", ".join(parts) + "}"


@pytest.mark.spark
@pytest.mark.parametrize("keyed", [True, False])
def test_records_with_the_engines_spans_equal_the_references(spark, keyed: bool) -> None:
    """``keyed``: the table has a primary key (a close needs its key alone); else its key is
    every column, the JSON ones too, cut out of the before images."""
    if not spans_exact(spark):
        pytest.fail("the embedded engine no longer cuts a JSON member's text as it stands")
    seed = int(os.environ.get("BINLAKE_FUZZ_SEED") or random.randrange(2 ** 31))
    print(f"BINLAKE_FUZZ_SEED={seed}")
    rnd = random.Random(seed)
    names = ["c0", "c1", "doc"]
    typing = _typed([("id", "bigint", "bigint(20)")] + [(n, "json", "json") for n in names])
    layout = plan_layout(None, typing, [])
    if not keyed:
        layout = Layout(layout.columns, tuple(layout.names), False)
    spans = span_columns(names)
    rows = []
    for i in range(400):
        kind = rnd.choice(["INSERT", "UPDATE", "DELETE"])
        rows.append((i, kind, _image(rnd, i, names) if kind != "INSERT" else None,
                     _image(rnd, i, names) if kind != "DELETE" else None))
    df = spark.createDataFrame(rows, "seq bigint, event_type string, row_before string, "
                                     "row_after string")
    cut = df.select("seq", *span_exprs(spans, layout.key)).orderBy("seq").collect()
    batch = {"seq": [r[0] for r in rows], "gtid": [f"0-1-{r[0]}" for r in rows],
             "event_timestamp": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * len(rows),
             "event_type": [r[1] for r in rows], "row_before": [r[2] for r in rows],
             "row_after": [r[3] for r in rows], "schema_version": ["s1"] * len(rows),
             "absent_columns": [None] * len(rows)}
    for column in cut[0].asDict():
        if column != "seq":
            batch[column] = [r[column] for r in cut]
    batch = pa.RecordBatch.from_pydict(batch)
    batches = [batch.slice(at, 20) for at in range(0, batch.num_rows, 20)]

    taken = []
    real = columns._span

    def watched(*args):
        taken.append(real(*args))
        return taken[-1]

    columns._span = watched
    try:
        fast = [b.to_pylist() for b in records(layout, typing, "db.t", spans=spans)(
            iter(batches))]
    finally:
        columns._span = real
    reference = [b.to_pylist() for b in records(layout, typing, "db.t", use_arrow=False)(
        iter(batches))]
    assert fast == reference, f"seed {seed}"
    assert sum(taken) > 200 and not all(taken), f"seed {seed}: spans taken {sum(taken)}"


@pytest.mark.parametrize("span,image,taken", [
    ('{"a": 1}', '{"id": 1, "doc": {"a": 1}}', True),
    ("[1, 2]", '{"doc": [1, 2], "n": null}', True),
    ("123", '{"doc": "123"}', False),  # a string document: its span is the string's text
    ("7", '{"doc": 7}', False),  # a number: parsed from the image
    ("", '{"doc": ""}', False),
    (None, '{"doc": null}', False),  # JSON null or no member: no span
    ('{"a": 1}', '{"doc":   {"a": 1}}', False),  # spacing before it: not found after the key
    ('{"a":1}', '{"doc": {"a": 1}}', False),  # rewritten by the engine: not in the image
    # a string document's text, found where another column's document nests the same key
    ('"abc"', '{"c0": {"doc": "abc"}, "doc": "\\"abc\\""}', False),
])
def test_which_spans_are_taken(span, image, taken) -> None:
    assert columns._span(span, '"doc": ', image) is taken


def test_only_plain_names_are_cut() -> None:
    assert span_columns(["doc", "my doc", "a.b", "_x9", "9x", "é"]) == {"doc": 0, "_x9": 1}
