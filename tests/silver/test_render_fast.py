"""The compiled silver renderer (``render_fast``) against the row-by-row reference.

Random tables of every column kind the loops write themselves (numbers, quoted temporal and
DECIMAL text, UTF-8 text with quotes, backslashes, every control character, non-BMP
characters and invalid bytes, JSON) and of the kinds they copy from an Arrow kernel (ENUM,
byte strings, latin1), with NULLs, INSERTs, UPDATEs that change some columns and DELETEs,
go through ``BatchRenderer`` and through ``tests/support/silver_reference.py``: the silver
rows and the quarantine rows must be identical. The corpus and the type-matrix workload are
compared the same way in ``tests/silver/test_render_diff.py``; here also with the loops off, and
the loops must have rendered the corpus's full images themselves.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.binlog import coltypes as T
from pipelines.bronze.records import BRONZE_SCHEMA
from pipelines.silver import render_fast
from pipelines.silver.naming import NamingPlan
from tests.silver.test_render_diff import (_assert_same, _both, _changes, _corpus_files,
                                           _decoded, _named, _plan)

UTF8MB4, UTF8MB3, LATIN1, BINARY = 45, 33, 8, 63
_TS = dt.datetime(2026, 11, 25, tzinfo=dt.timezone.utc)
_TEXT = st.text(st.characters(codec="utf-8", categories=None, exclude_characters=""),
                max_size=12) | st.sampled_from(['a"b', "a\\b", "\x00\x1f\x7f", "\u2028",
                                                "\U0001f600", "|x|", ""])


def _value(kind: str):
    """A strategy of one column's bronze values (bytes) for a column kind."""
    return {
        "int": st.integers(-2**63, 2**63 - 1).map(lambda v: b"%d" % v),
        "double": st.floats(allow_nan=False, allow_infinity=False).map(
            lambda v: repr(v).encode()),
        "decimal": st.decimals(-10**6, 10**6, places=2).map(lambda v: str(v).encode()),
        "datetime": st.just(b"2026-11-25 02:43:59.123456"),
        "utf8mb4": _TEXT.map(lambda s: s.encode()) | st.just(b"\xff\xfe"),
        "utf8mb3": _TEXT.map(lambda s: s.encode()),
        "latin1": st.binary(max_size=8),
        "binary": st.binary(max_size=8),
        "enum": st.integers(0, 3).map(lambda v: b"%d" % v),
        "json": st.sampled_from([b'{"a": [1, "x\\\\y"]}', b"null", b'"\xc3\xa9"', b"[]"]),
    }[kind]


_COLUMN = {  # kind → (type, meta, charset id)
    "int": (T.LONGLONG, 0, None), "double": (T.DOUBLE, 8, None),
    "decimal": (T.NEWDECIMAL, (12 << 8) | 2, None), "datetime": (T.DATETIME2, 6, None),
    "utf8mb4": (T.VARCHAR, 400, UTF8MB4), "utf8mb3": (T.VARCHAR, 300, UTF8MB3),
    "latin1": (T.VARCHAR, 40, LATIN1), "binary": (T.BLOB, 2, BINARY),
    "enum": (T.ENUM, 1, None), "json": (T.JSON, 4, None),
}


@st.composite
def _batches(draw):
    kinds = ["int"] + draw(st.lists(st.sampled_from(sorted(_COLUMN)), min_size=1, max_size=6))
    pk = sorted({0} | set(draw(st.lists(st.integers(0, len(kinds) - 1), max_size=2))))
    n = len(kinds)
    meta = dict(column_count=n, column_types=[_COLUMN[k][0] for k in kinds],
                column_meta=[_COLUMN[k][1] for k in kinds],
                column_names=[f'c{i}"{k}' if i % 3 == 2 else f"c{i}" for i, k in
                              enumerate(kinds)],
                column_charsets=[_COLUMN[k][2] for k in kinds], primary_key=pk,
                enum_values=[["a", "b", "ç"] if k == "enum" else None for k in kinds])

    def image():
        return [None if i > 0 and draw(st.integers(0, 4)) == 0 else draw(_value(k))
                for i, k in enumerate(kinds)]

    rows = []
    for r in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["INSERT", "UPDATE", "DELETE"]))
        before = image() if kind != "INSERT" else None
        after = image() if kind != "DELETE" else None
        if kind == "UPDATE" and draw(st.booleans()):
            after = [b if draw(st.booleans()) else a for b, a in zip(before, after)]
        rows.append(_row(r, "t", kind, before, after, meta))
    return pa.RecordBatch.from_pylist(rows, schema=BRONZE_SCHEMA)


def _row(r: int, table: str, kind: str, before, after, meta: dict) -> dict:
    """Bronze row change number ``r`` of ``db.table`` (its TABLE_MAP facts in ``meta``)."""
    row = {f.name: None for f in BRONZE_SCHEMA}
    row.update(source_id="src", server_id=1, binlog_file="bin.000001", start_pos=100 + r,
               end_pos=200 + r, row_in_event=0, event_timestamp=_TS, schema_name="db",
               table_name=table, event_type=kind, row_before=before, row_after=after, **meta)
    return row


@pytest.fixture(params=["compiled", "arrow"])
def path(request, monkeypatch):
    if request.param == "arrow":
        monkeypatch.setattr(render_fast, "available", lambda: False)
    else:
        assert render_fast.available()  # numba is a dependency (setup.cfg)
    return request.param


@given(batch=_batches())
@settings(max_examples=250, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_random_tables_render_as_the_reference(path, batch) -> None:
    (silver, held), (ref_silver, ref_held) = _both([batch], NamingPlan.build([], []))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(held, ref_held, "quarantine")


def test_corpus_renders_as_the_reference_on_both_paths(corpus: Path, path, monkeypatch) -> None:
    used = []
    real = render_fast.render

    def spy(*args):
        out = real(*args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(render_fast, "render", spy)
    batches = [_named(b, UTF8MB4) for b in _changes(_decoded(_corpus_files(corpus), 5000))]
    (silver, held), (ref_silver, ref_held) = _both(batches, _plan(batches))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(held, ref_held, "quarantine")
    if path == "compiled":  # the loops rendered most groups themselves
        assert sum(used) > len(used) // 2, (sum(used), len(used))


def _spy_render_side(monkeypatch, seen) -> None:
    """Wrap the loop's ``render_side``: ``seen(args, outcome)`` after every call."""
    assert render_fast.available()
    real = render_fast._JIT.render_side

    def spy(*args):
        outcome = real(*args)
        seen(args, outcome)
        return outcome

    monkeypatch.setattr(render_fast._JIT, "render_side", spy)


def _inserts_render_as_the_reference(notes: list[tuple[str, bytes]]) -> None:
    """INSERTs of ``(table, note)`` into tables ``(id BIGINT PRIMARY KEY, note VARCHAR
    utf8mb4)``, one row each, rendered by both paths: the same silver and quarantine rows."""
    meta = dict(column_count=2, column_types=[T.LONGLONG, T.VARCHAR], column_meta=[0, 40000],
                column_names=["id", "note"], column_charsets=[None, UTF8MB4], primary_key=[0])
    rows = [_row(r, table, "INSERT", None, [b"%d" % r, note], meta)
            for r, (table, note) in enumerate(notes)]
    batch = pa.RecordBatch.from_pylist(rows, schema=BRONZE_SCHEMA)
    (silver, held), (ref_silver, ref_held) = _both([batch], NamingPlan.build([], []))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(held, ref_held, "quarantine")


def test_text_longer_than_the_first_guess_is_rendered_after_a_retry(monkeypatch) -> None:
    """Control characters render as ``\\u00XX``, six bytes each: the loop's first output
    buffer (twice the group's value bytes) is too small, and the side is rendered again
    into a larger one, with the same rows as the reference."""
    outcomes = []
    _spy_render_side(monkeypatch, lambda args, outcome: outcomes.append(outcome))
    _inserts_render_as_the_reference([("t", b"\x01" * 300)] * 40)
    assert render_fast._ROOM in outcomes and outcomes[-1] == 0, outcomes


def test_a_groups_first_buffer_follows_its_own_rows(monkeypatch) -> None:
    """Each group of a batch (here two tables) renders its rows where they lie in the
    batch's images, whose child array holds every group's values: the first output buffer is
    sized by the group's own value bytes, not by the batch's (a 65,536-row batch of four
    tables asked for 30 MB per group and used 4-7 MB)."""
    sizes = []

    def seen(args, outcome) -> None:
        rows, lvalid = args[0], args[2]  # render_jit.render_side's argument order
        if lvalid[rows].any():  # a side with images (an INSERT's before side has none)
            sizes.append(len(args[-6]))  # out

    _spy_render_side(monkeypatch, seen)
    _inserts_render_as_the_reference([("big", b"x" * 10_000) if r % 2 else ("small", b"x" * 10)
                                      for r in range(80)])
    assert min(sizes) < 20_000 < 400_000 < max(sizes), sizes


def test_interleaved_groups_render_their_rows_where_they_lie(monkeypatch) -> None:
    """Two tables' rows alternate in a batch: each group's images are read at the rows'
    positions in the batch's own arrays (no copy into group order), and the rows come out as
    the reference renders them."""
    calls = []
    _spy_render_side(monkeypatch, lambda args, outcome: calls.append(args[:3]))
    _inserts_render_as_the_reference([("odd" if r % 2 else "even", b"n%d" % r)
                                      for r in range(40)])
    # (rows, list offsets, list valid): the after sides (an INSERT's before side has none)
    after = [rows.tolist() for rows, offsets, valid in calls if valid[rows].any()]
    assert all(len(offsets) == 41 for _, offsets, _ in calls), calls  # the batch's own
    assert sorted(after) == [list(range(0, 40, 2)), list(range(1, 40, 2))], calls


@pytest.mark.parametrize("at, start, end", [(0, 0, 0), (3, 1, 4), (0, 0, 7), (5, 6, 7)])
def test_the_loops_byte_copy_writes_exactly_its_span(at, start, end) -> None:
    """``render_jit._put`` (one ``llvm.memcpy``): ``src[start:end]`` lands at ``out[at:]``,
    nothing around it changes, and the new end comes back; int32 positions as the loops pass
    them from Arrow's offsets."""
    assert render_fast.available()
    src = np.frombuffer(b"abcdefg", np.uint8)
    out = np.full(12, ord("."), np.uint8)
    end_at = render_fast._JIT._put(out, np.int32(at), src, np.int32(start), np.int32(end))
    expected = bytearray(b"." * 12)
    expected[at:at + end - start] = src[start:end].tobytes()
    assert end_at == at + end - start
    assert out.tobytes() == bytes(expected)


_TEXTS = [  # (bytes, why): UTF-8 text as the loop meets it in a value
    (b"", "empty"), (b"plain ascii", "nothing to escape"), (b'say "hi"\\now', "quote, backslash"),
    (b"tab\there\nnew\rline\x08\x0c", "the short escapes"), (b"\x01\x1f\x00", "control: \\u00xx"),
    (b"caf\xc3\xa9 \xe2\x82\xac", "2- and 3-byte characters"), (b"\xf0\x9f\x98\x80!", "4-byte"),
    (b"\xc3", "cut after the lead byte"), (b"\xe2\x82", "cut inside a 3-byte character"),
    (b"\xc0\xaf", "overlong 2-byte"), (b"\xe0\x80\xaf", "overlong 3-byte"),
    (b"\xed\xa0\x80", "a surrogate"), (b"\xf4\x90\x80\x80", "past U+10FFFF"),
    (b"\xf0\x80\x80\xaf", "overlong 4-byte"), (b"\x80", "a lone continuation byte"),
    (b"\xf5\x80\x80\x80", "lead byte past 0xF4"), (b'a\xff"', "0xFF after text"),
]


@pytest.mark.parametrize("bmp_only", [False, True])
@pytest.mark.parametrize("raw, why", _TEXTS, ids=[w for _, w in _TEXTS])
def test_the_loops_text_is_json_dumps_or_refused(raw, why, bmp_only) -> None:
    """``render_jit._escaped_text`` (validation and escaping in one pass) writes what
    ``json.dumps(text, ensure_ascii=False)`` writes, and refuses (-1) exactly the bytes Python
    does not decode as UTF-8; with ``bmp_only`` (utf8mb3) also a 4-byte character."""
    try:
        text = raw.decode("utf-8")
        expected = None if bmp_only and any(ord(ch) > 0xFFFF for ch in text) else \
            json.dumps(text, ensure_ascii=False).encode("utf-8")
    except UnicodeDecodeError:
        expected = None
    assert render_fast.available()
    src = np.frombuffer(raw or b"\0", np.uint8)[:len(raw)]
    out = np.zeros(len(raw) * 6 + 2, np.uint8)
    end = render_fast._JIT._escaped_text(src, 0, len(raw), out, 0, bmp_only)
    assert (None if end < 0 else out[:end].tobytes()) == expected, why


def test_an_events_rows_apart_in_the_batch_render_in_one_group(monkeypatch) -> None:
    """Bronze keeps a rows event's rows together, and the grouping fingerprints each run of
    them once. Where one event's rows lie apart (here event 100's rows around event 101's),
    each run is fingerprinted, both runs meet in the one group of their table, and every row
    renders as the reference renders it."""
    meta = dict(column_count=2, column_types=[T.LONGLONG, T.VARCHAR], column_meta=[0, 40000],
                column_names=["id", "note"], column_charsets=[None, UTF8MB4], primary_key=[0])
    rows = []
    for k, (event, table) in enumerate([(0, "a"), (0, "a"), (1, "b"), (0, "a"), (1, "b")]):
        row = _row(event, table, "INSERT", None, [b"%d" % k, b"n%d" % k], meta)
        row["row_in_event"] = k
        rows.append(row)
    groups = []
    _spy_render_side(monkeypatch, lambda args, outcome: groups.append(args[0].tolist()))
    batch = pa.RecordBatch.from_pylist(rows, schema=BRONZE_SCHEMA)
    (silver, held), (ref_silver, ref_held) = _both([batch], NamingPlan.build([], []))
    _assert_same(silver, ref_silver, "silver")
    assert len(silver) == 5 and held == ref_held == []
    assert sorted(groups[1::2]) == [[0, 1, 3], [2, 4]], groups  # the after sides


def test_interleaved_groups_with_refused_and_minimal_rows_render_as_the_reference(path) -> None:
    """Three tables' rows alternate in one batch, so each group's rows lie apart: table a has
    a row whose image holds a value too many, table b MINIMAL images (columns absent: the Arrow
    path, its images taken from their positions), table c a DELETE without its before image
    and a text that is not UTF-8. Each refused row is named at its own position, the others
    render as the reference renders them, on the loops and on the Arrow path."""
    meta = dict(column_count=2, column_types=[T.LONGLONG, T.VARCHAR], column_meta=[0, 400],
                column_names=["id", "note"], column_charsets=[None, UTF8MB4], primary_key=[0])
    per_table = {
        "a": [("INSERT", None, [b"1", b"x"]), ("INSERT", None, [b"2", b"y", b"extra"]),
              ("UPDATE", [b"3", b"p"], [b"3", b"q"])],
        "b": [("UPDATE", [b"4", None], [b"4", b"r"]), ("INSERT", None, [b"5", b"s"]),
              ("DELETE", [b"6", None], None)],
        "c": [("DELETE", None, None), ("INSERT", None, [b"7", b"\xff"]),
              ("INSERT", None, [b"8", b"ok"])],
    }
    present = {("b", 0): ([True, False], [True, True]), ("b", 2): ([True, False], None)}
    rows = []
    for i in range(3):
        for table, changes in per_table.items():
            kind, before, after = changes[i]
            row = _row(len(rows), table, kind, before, after, meta)
            bp, ap = present.get((table, i), (None, None))
            row.update(before_present=bp, after_present=ap)
            rows.append(row)
    batch = pa.RecordBatch.from_pylist(rows, schema=BRONZE_SCHEMA)
    (silver, held), (ref_silver, ref_held) = _both([batch], NamingPlan.build([], []))
    _assert_same(silver, ref_silver, "silver")
    _assert_same(held, ref_held, "quarantine")
    refused = sorted((r["start_pos"] - 100, r["reason"]) for r in held)
    assert refused == [(2, "DELETE without its key image"),
                       (3, "image has 3 values, schema has 2 columns"),
                       (5, "column note: bytes not valid utf8mb4: ff")], refused
