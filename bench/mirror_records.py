#!/usr/bin/env python3
"""The mirror's record conversion (``mirror/plan.records``): the Arrow path beside the
per-value reference, in one run, on the same batch.

``python bench/mirror_records.py [--rows 20000] [--repeat 5]``

The batch is silver rows of ``bench/stream_load.py``'s table (BIGINT UNSIGNED key, TINYINT
UNSIGNED, INT, DECIMAL(14,4), VARCHAR, DATETIME(6), JSON, BLOB, VARCHAR, INT), a third each
INSERT, UPDATE, DELETE, as one Arrow batch; the same table without its JSON column too (a
JSON column is converted per value on both paths). With the JSON column also the Arrow path
given its documents' spans (``mirror/json_spans.py``), cut out of the images by the embedded
engine (Sail's ``get_json_object``, not timed: the engine does it in the plan, off Python).
Prints rows/s (best of ``--repeat``) and checks every path gives the reference's records.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402

from pipelines.mirror.plan import Layout, TableTyping, plan_layout, records  # noqa: E402
from pipelines.source.model import ColumnSchema, Snapshot, TableSchema  # noqa: E402

_COLUMNS = [("id", "bigint", "bigint(20) unsigned"), ("writer", "tinyint", "tinyint(3) unsigned"),
            ("qty", "int", "int(11)"), ("amount", "decimal", "decimal(14,4)"),
            ("name", "varchar", "varchar(64)"), ("at", "datetime", "datetime(6)"),
            ("doc", "json", "json"), ("blob_", "blob", "blob"), ("note", "varchar", "varchar(255)"),
            ("revision", "int", "int(11)")]


def _typing() -> TableTyping:
    cols = [ColumnSchema(n, i + 1, d, c, pk_ordinal=1 if n == "id" else None, is_json=d == "json")
            for i, (n, d, c) in enumerate(_COLUMNS)]
    snap = Snapshot("s1", dt.datetime(2024, 1, 1), "default", 1, None, "bench", None, None, None,
                    {("bench", "load"): TableSchema("bench", "load", cols)})
    return TableTyping.from_snapshots([snap], "bench", "load")


def _batch(rows: int) -> pa.RecordBatch:
    rnd = random.Random(1)

    def image(i: int) -> str:
        return json.dumps({
            "id": i, "writer": 1, "qty": rnd.randint(-1000, 1000),
            "amount": f"{rnd.randint(0, 10 ** 9)}.{rnd.randint(0, 9999):04d}",
            "name": f"name {rnd.random():.6f} é",
            "at": f"2024-05-01 12:00:{rnd.randint(0, 59):02d}.123456",
            "doc": {"k": rnd.randint(0, 99), "t": ["a", "b"]},
            "blob_": base64.b64encode(rnd.randbytes(rnd.randint(0, 64))).decode(),
            "note": None, "revision": 0}, ensure_ascii=False)

    kinds = [("INSERT", "UPDATE", "DELETE")[i % 3] for i in range(rows)]
    return pa.RecordBatch.from_pydict({
        "seq": list(range(rows)), "gtid": [f"0-1-{i}" for i in range(rows)],
        "event_timestamp": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * rows,
        "event_type": kinds,
        "row_before": [None if k == "INSERT" else image(i) for i, k in enumerate(kinds)],
        "row_after": [None if k == "DELETE" else image(i) for i, k in enumerate(kinds)],
        "schema_version": ["s1"] * rows, "absent_columns": [None] * rows})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    typing = _typing()
    full = plan_layout(None, typing, [])
    shapes = [("with its JSON column", full),
              ("without it", Layout(tuple(c for c in full.columns if c[0] != "doc"), full.key,
                                    full.has_pk))]
    batch = _batch(args.rows)
    spans, spanned = _spanned(batch)
    print(f"{args.rows:,} silver rows, one Arrow batch; rows/s, best of {args.repeat}")
    print(f"{'table':<24}{'reference':>12}{'arrow':>12}{'speed-up':>10}"
          f"{'arrow+spans':>13}{'speed-up':>10}")
    for label, layout in shapes:
        paths = [("reference", False, None, batch), ("arrow", True, None, batch)]
        if any(n in spans for n in layout.names):
            paths.append(("spans", True, spans, spanned))
        best, outs = {}, {}
        for path, use_arrow, cut, rows in paths:
            times = []
            for _ in range(args.repeat):
                fn = records(layout, typing, "bench.load", use_arrow=use_arrow, spans=cut)
                t = time.perf_counter()
                out = list(fn(iter([rows])))
                times.append(time.perf_counter() - t)
            outs[path] = [b.to_pylist() for b in out]
            best[path] = min(times)
        if any(out != outs["reference"] for out in outs.values()):
            print(f"{label}: the paths' records differ", file=sys.stderr)
            return 1
        ref, fast = args.rows / best["reference"], args.rows / best["arrow"]
        line = f"{label:<24}{ref:>12,.0f}{fast:>12,.0f}{fast / ref:>9.1f}x"
        if "spans" in best:
            cut = args.rows / best["spans"]
            line += f"{cut:>13,.0f}{cut / ref:>9.1f}x"
        print(line)
    return 0


def _spanned(batch: pa.RecordBatch) -> tuple[dict[str, int], pa.RecordBatch]:
    """The JSON columns' spans as the embedded engine cuts them, and ``batch`` with them."""
    from pipelines.config import EngineConfig
    from pipelines.engine.session import get_spark
    from pipelines.mirror.json_spans import span_columns, span_exprs, spans_exact

    spark = get_spark(EngineConfig())
    if not spans_exact(spark):
        return {}, batch
    spans = span_columns([n for n, d, _ in _COLUMNS if d == "json"])
    df = spark.createDataFrame(list(zip(batch.column("seq").to_pylist(),
                                        batch.column("row_before").to_pylist(),
                                        batch.column("row_after").to_pylist())),
                               "seq bigint, row_before string, row_after string")
    cut = df.select("seq", *span_exprs(spans, ["id"])).orderBy("seq").toArrow()
    out = batch
    for name in cut.column_names[1:]:
        out = out.append_column(name, cut.column(name).combine_chunks())
    return spans, out


if __name__ == "__main__":
    raise SystemExit(main())
