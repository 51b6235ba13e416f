"""Generated row-image code (pipelines.binlog.fast.rowcodegen) against the reference loop.

Every test decodes the same bytes twice: with the generated function and with
``rows._image`` (one ``values.column_decoder`` closure per value). Both must return the same
values and end position, or raise the same exception class with the same message. Images are
built from the hex cases of ``tests/binlog/test_values.py`` (known bronze text per type), so the
property tests also check the values themselves; mutated and truncated images check that the
generated code never returns what the reference would reject.

Also here: TABLE_MAP reuse in the parser (equal bytes → shared decoders, own header).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.binlog import coltypes as T
from pipelines.binlog.framing import EventHeader, RawEvent
from pipelines.binlog.parser import BinlogParser
from pipelines.binlog.fast.rowcodegen import image_function, rows_function
from pipelines.binlog.rows import _image
from pipelines.binlog.values import column_decoder
from tests.binlog.test_values import CASES, dec_meta, encode_datetime2, encode_decimal

# (type, meta, unsigned, raw value bytes, expected bronze bytes)
VALUES = [(t, m, u, bytes.fromhex(h.replace(" ", "")), x if isinstance(x, bytes) else x.encode())
          for t, m, u, h, x in CASES]


class _Table:
    """Decoders for a list of column specs and both image functions for a present subset."""

    def __init__(self, specs: list[tuple[int, int, bool | None]],
                 present: list[int] | None = None) -> None:
        self.types = [t for t, _, _ in specs]
        self.metas = [m for _, m, _ in specs]
        self.unsigned = [u for _, _, u in specs]
        self.decs = [column_decoder(t, m, u) for t, m, u in specs]
        self.ncols = len(specs)
        self.present = list(range(self.ncols)) if present is None else present
        cols = [(i, self.decs[i]) for i in self.present]
        nbytes = (len(cols) + 7) >> 3
        self.fallbacks = 0

        def reference(buf: bytes, pos: int) -> tuple[list, int]:
            self.fallbacks += 1
            return _image(buf, pos, cols, self.ncols, nbytes)

        self.ref = lambda buf, pos: _image(buf, pos, cols, self.ncols, nbytes)
        self.fast = image_function(self.types, self.metas, self.unsigned, self.decs,
                                   self.present, self.ncols, reference)
        assert self.fast is not None


def _outcome(fn, buf: bytes, pos: int):
    try:
        return "ok", fn(buf, pos)
    except Exception as exc:  # noqa: BLE001 - compared, not swallowed
        return "error", type(exc), str(exc)


def _same(table: _Table, buf: bytes, pos: int = 0):
    want = _outcome(table.ref, buf, pos)
    got = _outcome(table.fast, buf, pos)
    assert got == want
    return want


def _image_bytes(values: list[bytes | None]) -> bytes:
    """NULL bitmap (bit set = NULL) then the non-NULL values."""
    bits = sum(1 << k for k, v in enumerate(values) if v is None)
    nbytes = (len(values) + 7) >> 3
    return bits.to_bytes(nbytes, "little") + b"".join(v for v in values if v is not None)


@pytest.mark.parametrize("col_type,meta,unsigned,raw,text", VALUES)
def test_every_value_case_inside_an_image(col_type, meta, unsigned, raw, text) -> None:
    # The case between a BIGINT and a VARCHAR, in a struct run when it is fixed-width.
    specs = [(T.LONGLONG, 0, True), (col_type, meta, unsigned), (T.LONG, 0, False),
             (T.VARCHAR, 300, None)]
    table = _Table(specs)
    values = [(7).to_bytes(8, "little"), raw, (-5).to_bytes(4, "little", signed=True),
              b"\x02\x00hi"]
    for nulls in range(16):
        image = [None if nulls >> k & 1 else v for k, v in enumerate(values)]
        buf = b"\xee" + _image_bytes(image) + b"\xee"
        outcome = _same(table, buf, 1)
        expect = [None if nulls >> k & 1 else t for k, t in
                  enumerate([b"7", text, b"-5", b"hi"])]
        assert outcome == ("ok", (expect, len(buf) - 1))
    assert table.fallbacks == 0


@pytest.mark.parametrize("col_type,meta,unsigned,raw,text", VALUES)
def test_truncated_image_fails_like_the_reference(col_type, meta, unsigned, raw, text) -> None:
    table = _Table([(T.SHORT, 0, None), (col_type, meta, unsigned)])
    buf = _image_bytes([b"\x01\x00", raw])
    for cut in range(len(buf)):
        outcome = _same(table, buf[:cut])
        assert outcome[0] == "error"


# Impossible bytes and impossible metadata: (type, meta, value hex).
MALFORMED = [
    (T.NEWDECIMAL, dec_meta(10, 2), "85f5e100 00"),  # int group 1e8 > 8 digits
    (T.NEWDECIMAL, dec_meta(10, 2), "80000000 64"),  # frac group 100 > 2 digits
    (T.NEWDECIMAL, dec_meta(20, 2), "80000000 3b9aca00 01"),  # 9-digit group = 1e9
    (T.NEWDECIMAL, dec_meta(14, 4), "8a 00000000 0000"),  # 1-digit lead group = 10
    (T.DATETIME2, 0, "0000000000"),  # negative
    (T.DATETIME2, 2, "99b2badb47 64"),  # 100 hundredths
    (T.DATETIME2, 6, "99b2badb47 0f4240"),  # 1000000 us
    (T.NEWDECIMAL, dec_meta(2, 5), "00"),  # impossible metadata: the closure raises
    (T.DATETIME2, 9, "00"),
    (T.BLOB, 5, "00"),
    (99, 0, "00"),
]


@pytest.mark.parametrize("col_type,meta,hexstr", MALFORMED)
def test_malformed_value_fails_like_the_reference(col_type, meta, hexstr) -> None:
    table = _Table([(T.TINY, 0, None), (col_type, meta, None)])
    buf = b"\x00\x01" + bytes.fromhex(hexstr.replace(" ", "")) + b"\x00" * 8
    outcome = _same(table, buf)
    assert outcome[0] == "error"


@st.composite
def _images(draw):
    """A table of random value cases, a present subset, one image with random NULLs."""
    cases = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=24))
    present = [i for i in range(len(cases)) if draw(st.booleans()) or i == 0]
    nulls = [draw(st.integers(0, 3)) == 0 for _ in present]
    specs = [(t, m, u) for t, m, u, _, _ in cases]
    values = [None if n else cases[i][3] for i, n in zip(present, nulls)]
    expect = [None] * len(cases)
    for i, n in zip(present, nulls):
        expect[i] = None if n else cases[i][4]
    return specs, present, _image_bytes(values), expect


@given(_images())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_random_images_decode_like_the_reference(case) -> None:
    specs, present, buf, expect = case
    table = _Table(specs, present)
    assert _same(table, buf + b"\x00") == ("ok", (expect, len(buf)))
    assert table.fallbacks == 0


@given(_images(), st.data())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_images_decode_or_fail_like_the_reference(case, data) -> None:
    specs, present, buf, _ = case
    table = _Table(specs, present)
    raw = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 4))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    _same(table, bytes(raw))
    _same(table, bytes(raw[:cut]))


@st.composite
def _decimal_values(draw):
    precision = draw(st.integers(1, 30))
    scale = draw(st.integers(0, min(precision, 12)))
    ip = draw(st.text("0123456789", max_size=precision - scale))
    fp = draw(st.text("0123456789", min_size=scale, max_size=scale))
    return draw(st.booleans()), ip, fp, precision, scale


@given(_decimal_values())
@settings(max_examples=600)
def test_inline_decimals(case) -> None:
    negative, ip, fp, precision, scale = case
    raw = encode_decimal(negative, ip, fp, precision, scale)
    text = (ip.lstrip("0") or "0") + ("." + fp if scale else "")
    if negative and (ip.strip("0") or fp.strip("0")):
        text = "-" + text
    table = _Table([(T.NEWDECIMAL, dec_meta(precision, scale), None)])
    assert _same(table, b"\x00" + raw) == ("ok", ([text.encode()], 1 + len(raw)))
    assert table.fallbacks == 0


@given(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23),
       st.integers(0, 59), st.integers(0, 59), st.integers(0, 999999), st.integers(0, 6))
@settings(max_examples=600)
def test_inline_datetime2(y, mo, d, h, mi, s, us, fsp) -> None:
    us -= us % 10 ** (6 - fsp)
    raw = encode_datetime2(y, mo, d, h, mi, s, us, fsp)
    text = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
    if fsp:
        text += f".{us // 10 ** (6 - fsp):0{fsp}d}"
    table = _Table([(T.DATETIME2, fsp, None)])
    assert _same(table, b"\x00" + raw) == ("ok", ([text.encode()], 1 + len(raw)))
    assert table.fallbacks == 0


def test_many_columns_use_several_bitmap_bytes() -> None:
    specs = [(T.LONG, 0, None)] * 20
    table = _Table(specs)
    values = [None if k % 3 == 0 else k.to_bytes(4, "little") for k in range(20)]
    expect = [None if k % 3 == 0 else str(k).encode() for k in range(20)]
    assert _same(table, _image_bytes(values)) == ("ok", (expect, len(_image_bytes(values))))


# --- TABLE_MAP reuse in the parser -----------------------------------------------------------

# TABLE_MAP body (post-header length 8): table_id 6 bytes, flags, `db`.`t` (INT, VARCHAR(300)),
# metadata block (2c01 = 300), NULL-able bitmap.
_TM_TAIL = bytes.fromhex("0100" "02 6462 00" "01 74 00" "02" "03 0f" "02 2c01" "02")


def _table_map_event(parser: BinlogParser, pos: int, table_id: int):
    body = table_id.to_bytes(6, "little") + _TM_TAIL
    header = EventHeader(0, 19, 1, 19 + len(body), pos + 19 + len(body), 0, pos)
    return parser.parse(RawEvent(header, body))


def test_table_map_of_equal_bytes_shares_decoders_but_keeps_its_header() -> None:
    from pipelines.binlog.events import FormatDescription

    parser = BinlogParser()
    parser.fde = FormatDescription(
        EventHeader(0, 15, 1, 0, 0, 0, 4), 4, "10.11.0-MariaDB", 0, 19, bytes([8] * 40), 0)
    a = _table_map_event(parser, 100, 42)
    b = _table_map_event(parser, 300, 42)
    c = _table_map_event(parser, 500, 43)
    assert (a.header.pos, b.header.pos, c.header.pos) == (100, 300, 500)
    assert (a.table_id, b.table_id, c.table_id) == (42, 42, 43)
    assert a.column_types == b.column_types == [T.LONG, T.VARCHAR]
    assert a.schema == "db" and a.column_meta == [0, 300] and a.nullable == [False, True]
    assert b.decoders() is a.decoders() and c.image_cache() is a.image_cache()
    assert parser.table_maps[43] is c and parser.table_maps[42] is b
    # rebound() passes every field on (a field added to TableMap must be added there too).
    assert c == dataclasses.replace(a, header=c.header, table_id=43)


# --- generated loops over all rows of an event ------------------------------------------------

def _reference_rows(table: _Table, kind: str, buf: bytes):
    """The reference loop of rows.decode_rows: (rows, stop) or the exception it raises."""
    return _reference_from(table, kind, buf, [], 0)


def _reference_from(table: _Table, kind: str, buf: bytes, rows: list, pos: int):
    """Continue ``rows`` with the reference loop from ``pos``: (rows, stop) or the error."""
    try:
        while pos < len(buf):
            a, pos = table.ref(buf, pos)
            if kind == "UPDATE":
                b, pos = table.ref(buf, pos)
                rows.append((a, b))
            else:
                rows.append((None, a) if kind == "INSERT" else (a, None))
    except Exception as exc:  # noqa: BLE001
        return "error", len(rows), pos, type(exc), str(exc)
    return "ok", rows, pos


def _generated_rows(table: _Table, kind: str, buf: bytes):
    """The generated loop, then the reference from where it stopped (as decode_rows does)."""
    loop = rows_function(table.types, table.metas, table.unsigned, table.decs, table.ncols,
                         kind, table.present, table.present if kind == "UPDATE" else None)
    rows: list = []
    stop = loop(buf, 0, len(buf), rows.append)
    assert 0 <= stop <= len(buf)
    return _reference_from(table, kind, buf, rows, stop)


@given(_images(), st.integers(1, 6), st.sampled_from(["INSERT", "DELETE", "UPDATE"]), st.data())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_generated_loops_decode_or_fail_like_the_reference(case, copies, kind, data) -> None:
    specs, present, image, _ = case
    table = _Table(specs, present)
    buf = image * (copies * (2 if kind == "UPDATE" else 1))
    assert _generated_rows(table, kind, buf) == _reference_rows(table, kind, buf)
    assert _reference_rows(table, kind, buf)[0] == "ok"
    raw = bytearray(buf)
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for mutated in (bytes(raw), bytes(raw[:cut])):
        assert _generated_rows(table, kind, mutated) == _reference_rows(table, kind, mutated)


def test_loops_are_compiled_on_the_second_sighting_and_bounded_per_table() -> None:
    from pipelines.binlog import rows
    from pipelines.binlog.table_map import TableMap

    tm = TableMap(None, 1, "db", "t", [T.LONG] * 12, [0] * 12, [True] * 12)
    assert rows._rows_fn(tm, "INSERT", None, None) is None  # seen once: reference loop
    assert callable(rows._rows_fn(tm, "INSERT", None, None))
    assert rows._rows_fn(tm, "INSERT", None, None) is rows._rows_fn(tm, "INSERT", None, None)
    # MINIMAL images: one set of columns per bitmap; only _MAX_LOOPS of them get code.
    bitmaps = [[bool(m >> i & 1) for i in range(12)] for m in range(1, 200)]
    built = 0
    for present in bitmaps:
        rows._rows_fn(tm, "DELETE", present, None)
        built += callable(rows._rows_fn(tm, "DELETE", present, None))
    assert built == rows._MAX_LOOPS - 1


# --- the whole corpus: generated loops from the first event vs the reference only -------------

def _decode_all(path: str) -> list:
    """Every rows event's (position, kind, rows) of a corpus file, then the error if any."""
    from pipelines.binlog.events import RowsEvent
    from pipelines.binlog.reader import BinlogFileReader
    from pipelines.errors import DecodeError

    out: list = []
    try:
        for event in BinlogFileReader(path):
            if isinstance(event, RowsEvent):
                out.append((event.header.pos, event.kind, event.rows, event.partial_json_flags))
    except DecodeError as exc:
        out.append((type(exc), str(exc)))
    return out


def test_corpus_rows_equal_with_and_without_generated_code(monkeypatch) -> None:
    from pipelines.binlog import rows
    from tests.conftest import CORPUS

    files = sorted(str(p) for p in CORPUS.rglob("*") if p.is_file()
                   and "expected" not in p.relative_to(CORPUS).parts and p.name != "MANIFEST.md")
    assert len(files) > 100

    def always(tm, kind, present_a, present_b):  # generated code from the first event on
        cols_a = [i for i, _ in rows._columns(tm, present_a)]
        cols_b = [i for i, _ in rows._columns(tm, present_b)] if kind == "UPDATE" else None
        return rows_function(tm.column_types, tm.column_meta, tm.unsigned, tm.decoders(),
                             tm.column_count, kind, cols_a, cols_b)

    for path in files:
        monkeypatch.setattr(rows, "_rows_fn", always)
        fast = _decode_all(path)
        monkeypatch.setattr(rows, "_rows_fn", lambda *args: None)
        assert fast == _decode_all(path), path
