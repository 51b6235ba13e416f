"""Bronze rows compared across decodings that write their TABLE_MAP rows in different places.

Each decoding task (a file chunk, a stream batcher) writes a TABLE_MAP row at the first row
change naming a map (docs/bronze.md): decoded whole or in chunks, or streamed with rollbacks,
the row changes are the same but the TABLE_MAP rows' count and positions differ. What must be
equal is the row changes and the set of facts they name.
"""

from __future__ import annotations

from pipelines.bronze.records import TABLE_MAP_FIELDS

FACTS = ["table_map_hash", "schema_name", "table_name", "column_count", *TABLE_MAP_FIELDS]


def split_maps(rows: list[dict]) -> tuple[list[dict], list[tuple]]:
    """(the rows other than TABLE_MAP rows, in order; the distinct facts of the TABLE_MAP
    rows, sorted)."""
    others = [r for r in rows if r["event_type"] != "TABLE_MAP"]
    facts = {tuple(repr(r[c]) for c in FACTS) for r in rows if r["event_type"] == "TABLE_MAP"}
    return others, sorted(facts)
