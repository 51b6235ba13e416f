"""The compiled row loop (pipelines.binlog.fast.rowkernel) against the Python decoding.

Every test decodes the same rows twice: through ``rows_columnar.decode_into`` (the compiled
loop writing into image sinks, its fix-ups rendered in Python, the whole event handed to
Python when the loop gives up) and through ``rows.python_rows`` (the reference, with its
generated code). Both must give the same images, or raise the same error class with the same
located message. The value cases are ``tests/binlog/test_values.py``'s (known bronze text per type),
so the property tests also check the values themselves; mutated and truncated rows check that
the loop never writes what the reference would reject. Last, every corpus file decodes to the
same bronze batches with and without the loop, ERROR rows included.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.binlog import coltypes as T
from pipelines.binlog.fast import rowkernel
from pipelines.bronze.decode_task import decode_file_batches
from pipelines.binlog.events import EventType as E
from pipelines.binlog.events import PendingRows, RowsEvent
from pipelines.binlog.framing import EventHeader
from pipelines.binlog.fast.image_sink import ImageSink
from pipelines.binlog.rows import python_rows
from pipelines.binlog.table_map import TableMap
from pipelines.errors import DecodeError
from tests.binlog.test_rows_fast import MALFORMED
from tests.binlog.test_values import CASES

VALUES = [(t, m, u, bytes.fromhex(h.replace(" ", "")), x if isinstance(x, bytes) else x.encode())
          for t, m, u, h, x in CASES]
_CODES = {"INSERT": E.WRITE_ROWS, "DELETE": E.DELETE_ROWS, "UPDATE": E.UPDATE_ROWS}


def test_the_loop_is_available() -> None:
    assert rowkernel.installed() and rowkernel.available()  # numba: setup.cfg


def _image_bytes(values: list[bytes | None]) -> bytes:
    """NULL bitmap (bit set = NULL) then the non-NULL values."""
    bits = sum(1 << k for k, v in enumerate(values) if v is None)
    return bits.to_bytes((len(values) + 7) >> 3, "little") + b"".join(
        v for v in values if v is not None)


def _table(specs) -> TableMap:
    return TableMap(None, 7, "db", "t", [t for t, _, _ in specs], [m for _, m, _ in specs],
                    [True] * len(specs), [bool(u) for _, _, u in specs])


def _bitmap(present: list[int] | None, n: int) -> list[bool] | None:
    return None if present is None else [i in present for i in range(n)]


def _event(tm: TableMap, kind: str, body: bytes, present_a, present_b) -> RowsEvent:
    header = EventHeader(0, _CODES[kind], 1, len(body) + 19, 0, 0, 4242)
    e = RowsEvent(header, kind, 7, 0, tm, [], None if kind == "INSERT" else present_a,
                  None if kind == "DELETE" else (present_b if kind == "UPDATE" else present_a))
    e.pending = PendingRows(_CODES[kind], body, 0, body[:32])
    return e


def _compiled(tm, kind, body, present_a, present_b, room=(1, 1, 1)):
    """Through the loop, starting from tiny sinks (every growth path taken)."""
    from pipelines.binlog.fast.rows_columnar import decode_into

    before, after = ImageSink(*room), ImageSink(*room)
    try:
        n = decode_into(_event(tm, kind, body, present_a, present_b), before, after, "f")
    except DecodeError as exc:
        return "error", type(exc), str(exc)
    got = before.to_arrow().to_pylist(), after.to_arrow().to_pylist()
    assert len(got[0]) == len(got[1]) == n
    return "ok", got


def _reference(tm, kind, body, present_a, present_b):
    """Through the Python decoding, located as the parser locates its errors."""
    try:
        rows, _ = python_rows(tm, kind, _CODES[kind], body, 0, present_a, present_b)
    except DecodeError as exc:
        exc = exc.located(file="f", pos=4242, event_type=_CODES[kind], preview=body[:32])
        return "error", type(exc), str(exc)
    return "ok", ([r[0] for r in rows], [r[1] for r in rows])


def _loop_alone(tm, kind, body, present_a, present_b) -> int | None:
    """Rows the compiled loop (with its fix-ups) wrote, or None: it gave up."""
    from pipelines.binlog.fast.rows_columnar import _compiled as loop

    return loop(_event(tm, kind, body, present_a, present_b), ImageSink(), ImageSink())


def _same(specs, kind: str, body: bytes, present: list[int] | None = None):
    tm = _table(specs)
    bits = _bitmap(present, len(specs))
    want = _reference(tm, kind, body, bits, bits)
    assert _compiled(tm, kind, body, bits, bits) == want
    assert _compiled(tm, kind, body, bits, bits, room=(4096, 65536, 1 << 20)) == want
    if want[0] == "ok":  # the loop took every row itself, not the Python fallback
        assert _loop_alone(tm, kind, body, bits, bits) == len(want[1][0])
    return want


@pytest.mark.parametrize("col_type,meta,unsigned,raw,text", VALUES)
def test_every_value_case_inside_an_image(col_type, meta, unsigned, raw, text) -> None:
    specs = [(T.LONGLONG, 0, True), (col_type, meta, unsigned), (T.LONG, 0, False),
             (T.VARCHAR, 300, None)]
    values = [(7).to_bytes(8, "little"), raw, (-5).to_bytes(4, "little", signed=True),
              b"\x02\x00hi"]
    for nulls in range(16):
        image = [None if nulls >> k & 1 else v for k, v in enumerate(values)]
        expect = [None if nulls >> k & 1 else t
                  for k, t in enumerate([b"7", text, b"-5", b"hi"])]
        for kind in ("INSERT", "DELETE", "UPDATE"):
            body = _image_bytes(image) * (2 if kind == "UPDATE" else 1)
            outcome = _same(specs, kind, body)
            before, after = outcome[1]
            assert (after if kind == "INSERT" else before) == [expect]


@pytest.mark.parametrize("col_type,meta,unsigned,raw,text", VALUES)
def test_truncated_rows_fail_like_the_reference(col_type, meta, unsigned, raw, text) -> None:
    specs = [(T.SHORT, 0, None), (col_type, meta, unsigned)]
    body = _image_bytes([b"\x01\x00", raw]) * 2
    for cut in range(1, len(body)):
        _same(specs, "INSERT", body[:cut])


@pytest.mark.parametrize("col_type,meta,hexstr", MALFORMED + [
    (T.TIMESTAMP2, 3, "5f5e1000 2710"),  # 10000 > 3 digits of fraction
    (T.TIME2, 4, "800000 2710"),
    (T.JSON, 2, "0300 ffffff"),  # not binary JSON: the fix-up's decoder raises
])
def test_malformed_value_fails_like_the_reference(col_type, meta, hexstr) -> None:
    specs = [(T.TINY, 0, None), (col_type, meta, None)]
    body = b"\x00\x01" + bytes.fromhex(hexstr.replace(" ", "")) + b"\x00" * 8
    for kind in ("INSERT", "UPDATE"):
        assert _same(specs, kind, body)[0] == "error"


def test_a_good_row_then_a_bad_one_leaves_the_sinks_as_they_were() -> None:
    from pipelines.binlog.fast.rows_columnar import decode_into

    tm = _table([(T.LONG, 0, None), (T.DATETIME2, 0, None)])
    good = _image_bytes([b"\x01\x00\x00\x00", bytes.fromhex("99b2badb47")])
    bad = _image_bytes([b"\x02\x00\x00\x00", bytes.fromhex("0000000000")])
    before, after = ImageSink(), ImageSink()
    before.add_nulls(1)
    after.add_python([[b"x", None]])
    with pytest.raises(DecodeError, match=r"^f, pos 4242, event type 30: row 1 of db\.t"):
        decode_into(_event(tm, "INSERT", good + bad, None, None), before, after, "f")
    assert before.to_arrow().to_pylist() == [None]
    assert after.to_arrow().to_pylist() == [[b"x", None]]


@st.composite
def _rows(draw):
    """A table of random value cases, present subsets, a rows event of random NULLs."""
    cases = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=20))
    specs = [(t, m, u) for t, m, u, _, _ in cases]
    kind = draw(st.sampled_from(["INSERT", "DELETE", "UPDATE"]))
    full = draw(st.booleans())
    present = None if full else [i for i in range(len(cases)) if draw(st.booleans()) or i == 0]
    cols = range(len(cases)) if present is None else present
    images = []
    for _ in range(draw(st.integers(1, 5)) * (2 if kind == "UPDATE" else 1)):
        images.append(_image_bytes([None if draw(st.integers(0, 3)) == 0 else cases[i][3]
                                    for i in cols]))
    return specs, kind, present, b"".join(images)


@given(_rows())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_random_rows_decode_like_the_reference(case) -> None:
    specs, kind, present, body = case
    assert _same(specs, kind, body, present)[0] == "ok"


@given(_rows(), st.data())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_mutated_rows_decode_or_fail_like_the_reference(case, data) -> None:
    specs, kind, present, body = case
    raw = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    _same(specs, kind, bytes(raw), present)
    if cut:
        _same(specs, kind, bytes(raw[:cut]), present)


def test_many_fixups_in_one_event_grow_the_scratch() -> None:
    specs = [(T.FLOAT, 4, None), (T.DOUBLE, 8, None)] * 4
    body = _image_bytes([np.float32(1.5).tobytes(), np.float64(-0.1).tobytes()] * 4) * 600
    outcome = _same(specs, "INSERT", body)
    assert outcome[1][1][0] == [b"1.5", b"-0.1"] * 4 and len(outcome[1][1]) == 600



def test_threads_decoding_at_once_keep_their_own_fixups() -> None:
    """The embedded engine runs a run's decoding tasks in threads of one process, and the loop
    runs without the GIL: each thread's FLOAT/DOUBLE fix-ups must stay its own (a shared
    scratch gave threads each other's values: 3 of 4 threads wrong in 300 rounds)."""
    import threading

    specs = [(T.FLOAT, 4, None), (T.DOUBLE, 8, None)] * 4
    tm = _table(specs)
    wrong: list[int] = []

    def decode(k: int) -> None:
        values = [np.float32(k + 0.5).tobytes(), np.float64(-k - 0.25).tobytes()] * 4
        body = _image_bytes(values) * 300
        want = _reference(tm, "INSERT", body, None, None)
        if want[1][1][0][:2] != [f"{k}.5".encode(), f"-{k}.25".encode()]:
            wrong.append(k)  # not the values written (an assert here would stay in the thread)
        for _ in range(300):
            if _compiled(tm, "INSERT", body, None, None, room=(4096, 65536, 1 << 20)) != want:
                wrong.append(k)
                return

    threads = [threading.Thread(target=decode, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []

# --- whole files: bronze batches with and without the loop -------------------------------

def _files() -> list[str]:
    from pathlib import Path

    from tests.conftest import CORPUS

    REPO = Path(__file__).resolve().parents[2]

    files = sorted(str(p) for p in CORPUS.rglob("*") if p.is_file()
                   and "expected" not in p.relative_to(CORPUS).parts and p.name != "MANIFEST.md")
    assert len(files) > 100
    return files + sorted(str(p) for p in (REPO / "samples" / "binlogs").glob("*.0*"))


def _table_of(path: str, columnar: bool, batch_rows: int) -> pa.Table:
    return pa.Table.from_batches(list(decode_file_batches(
        path, source_id="s", subprocess=False, columnar=columnar, batch_rows=batch_rows,
        statement_text=True)))


@pytest.mark.parametrize("batch_rows", [20000, 7])
def test_every_corpus_file_gives_the_same_bronze_with_and_without_the_loop(batch_rows) -> None:
    for path in _files():
        python = _table_of(path, False, batch_rows)
        compiled = _table_of(path, True, batch_rows)
        assert compiled.equals(python), path
