"""Every file of the shared binlog corpus (``../shared/corpus``, see its MANIFEST.md) decoded.

Per file, three independent references:

* an event walker written here (headers and ``event_length`` only; TRANSACTION_PAYLOADs
  unpacked with zstandard), which the decoder's event counts and type histograms must equal,
  and the facts MANIFEST.md states (event count, histogram, events inside payloads,
  checksum, server version) where it has a section for the file;
* ``mariadb-binlog -vv`` (``tests/support/binlog_verbose.py``): every row change and value.
  Where the tool cannot read the file as it is (MySQL 8 TRANSACTION_PAYLOAD, tagged GTIDs,
  JSON/VECTOR columns, collation ids > 255), it reads a *synthetic* binlog built here from
  the same events (payloads unpacked, tagged GTID events dropped, JSON/VECTOR retyped BLOB,
  optional metadata cut), so the row framing and bytes are still checked by the tool;
* the ``expected/`` outputs of the origin repositories (DECIMAL inserts, query listings,
  mysqlbinlog output) and the values the origin's tests assert, written out below.

Files that cannot be decoded are listed in ``EXPECTED_ERRORS`` with the error class,
position and message they must fail with.
"""

from __future__ import annotations

import collections
import decimal
import re
import struct
import zlib
from pathlib import Path

import pytest
import zstandard

from pipelines.binlog import events as ev
from pipelines.binlog.json_binary import json_binary_to_text
from pipelines.binlog.reader import BinlogFileReader
from pipelines.errors import DecodeError, TruncatedError
from tests.conftest import CORPUS
from tests.support.binlog_verbose import (is_unsigned, normalize_printed, parse_verbose,
                                          printed_matches, read_row_changes,
                                          run_mariadb_binlog)

BB = "blackbeam__rust_mysql_common/test-data__binlogs__"


def _corpus_files() -> list[str]:
    if not CORPUS.is_dir():
        return []
    return sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
                  if p.is_file() and "expected" not in p.relative_to(CORPUS).parts
                  and p.name != "MANIFEST.md")


FILES = _corpus_files()

# name -> (error class, position, words the message must contain)
EXPECTED_ERRORS: dict[str, tuple[type, int, str]] = {
    # 14 bytes: the magic and 10 bytes of a FORMAT_DESCRIPTION header.
    BB + "binlog_truncated_event.000001": (TruncatedError, 4, "ends inside an event header"),
    # A relay log whose QUERY event at 91204 was overwritten (its "status block" is 16949
    # bytes in a 171-byte event); mariadb-binlog fails on the same event.
    BB + "corrupt-relay-bin.000624": (DecodeError, 91204, "run past the event end"),
    # MariaDB 10.0.17, `d timestamp(3)` logged as old TIMESTAMP (7) without its precision:
    # the 6-byte value cannot be framed from the binlog (mariadb-binlog fails too).
    "pingcap__tiflow/mysql-bin.000001": (TruncatedError, 1819, "MariaDB 5.3–10.0"),
}
# name -> end of the last complete event: files whose FORMAT_DESCRIPTION still says "in use"
# and that end inside an event (a server still writing): not an error, a partial tail.
EXPECTED_PARTIAL = {BB + "binlog_truncated_prev_gtid_event.000001": 120}

# MySQL 5.1/5.2 "-a_drop" development trees numbered events 16–22 differently.
A_DROP = {16: 19, 17: 20, 18: 21, 19: 22, 20: 16, 21: 17, 22: 18}


@pytest.mark.parametrize("name", ["corpus"])
def test_corpus_is_there(corpus: Path, name: str) -> None:
    assert len(FILES) == 113, f"expected the 113 corpus files, found {len(FILES)}"


# --- the independent walker ---------------------------------------------------------------

class Walk:
    """Events of a file as framed by headers only: (pos, type code, raw bytes)."""

    def __init__(self, data: bytes) -> None:
        self.events: list[tuple[int, int, bytes]] = []
        self.inner: collections.Counter = collections.Counter()
        self.payloads: dict[int, list[bytes]] = {}
        self.stopped_at: int | None = None
        pos = 4
        while pos < len(data):
            if pos + 19 > len(data):
                self.stopped_at = pos
                break
            code = data[pos + 4]
            (length,) = struct.unpack_from("<I", data, pos + 9)
            if length < 19 or pos + length > len(data):
                self.stopped_at = pos
                break
            raw = data[pos:pos + length]
            self.events.append((pos, code, raw))
            if code == 40:
                self.payloads[pos] = inner = _payload_events(raw)
                self.inner.update(e[4] for e in inner)
            pos += length
        self.permuted = b"-a_drop" in data[4 + 19 + 2:4 + 19 + 52]
        self.crc = not self.permuted and _fde_crc(data)

    def histogram(self) -> dict[int, int]:
        codes = (A_DROP.get(c, c) if self.permuted else c for _, c, _ in self.events)
        return dict(collections.Counter(codes))


def _fde_crc(data: bytes) -> bool:
    if len(data) < 4 + 19 + 57:
        return False
    (length,) = struct.unpack_from("<I", data, 4 + 9)
    fde = data[4:4 + length]
    version = fde[19 + 2:19 + 52].split(b"\0")[0].decode()
    nums = [int(re.match(r"\d*", p).group() or 0) for p in version.split("-")[0].split(".")]
    return tuple(nums) >= (5, 6, 1) and fde[-5] == 1


def _packed(buf: bytes, pos: int) -> tuple[int, int]:
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(buf[pos + 1:pos + 1 + size], "little"), pos + 1 + size


def _payload_events(raw: bytes) -> list[bytes]:
    body = raw[19:-4]
    pos, fields = 0, {}
    while True:
        ftype, pos = _packed(body, pos)
        if ftype == 0:
            break
        flen, pos = _packed(body, pos)
        fields[ftype], _ = _packed(body[pos:pos + flen], 0)
        pos += flen
    data = body[pos:]
    if fields.get(2, 0) == 0:
        data = zstandard.ZstdDecompressor().decompress(data, max_output_size=fields[3])
    out, p = [], 0
    while p < len(data):
        (length,) = struct.unpack_from("<I", data, p + 9)
        out.append(data[p:p + length])
        p += length
    return out


# --- the manifest ---------------------------------------------------------------------------

def _manifest() -> dict[str, str]:
    if not (CORPUS / "MANIFEST.md").is_file():
        return {}
    text = (CORPUS / "MANIFEST.md").read_text()
    return dict(re.findall(r"### `([^`]+)`(.*?)(?=\n### |\n## |\Z)", text, re.S))


MANIFEST = _manifest()


def _codes(line: str) -> dict[int, int]:
    return {int(c): int(n) for c, n in re.findall(r"\((\d+)\)=(\d+)", line)}


# --- decoding every file ------------------------------------------------------------------

def _decode(path: Path) -> tuple[BinlogFileReader, list[ev.Event], list[ev.Event]]:
    """(reader, top-level events, events from inside payloads) of one file."""
    reader = BinlogFileReader(str(path))
    top: list[ev.Event] = []
    inner: list[ev.Event] = []
    last_pos = -1
    for event in reader:
        if event.header.pos > last_pos:
            top.append(event)
            last_pos = event.header.pos
        else:
            assert isinstance(top[-1], ev.TransactionPayload)
            assert event.header.pos == top[-1].header.pos
            inner.append(event)
    return reader, top, inner


@pytest.mark.parametrize("name", FILES)
def test_file_decodes_as_the_walker_and_manifest_say(corpus: Path, name: str) -> None:
    path = corpus / name
    data = path.read_bytes()
    if name in EXPECTED_ERRORS:
        cls, pos, words = EXPECTED_ERRORS[name]
        reader = BinlogFileReader(str(path))
        seen = []
        with pytest.raises(cls) as info:
            for event in reader:
                seen.append(event)
        err = info.value
        assert (err.file, err.pos) == (path.name, pos), str(err)
        assert words in str(err) and f"pos {pos}" in str(err)
        # Everything before the bad event was decoded.
        walk = Walk(data)
        assert reader.events == sum(1 for p, _, _ in walk.events if p < pos)
        return
    reader, top, inner = _decode(path)
    walk = Walk(data)
    if name in EXPECTED_PARTIAL:
        assert reader.partial_tail and reader.end_pos == EXPECTED_PARTIAL[name]
        assert walk.stopped_at == reader.end_pos
    else:
        assert walk.stopped_at is None and not reader.partial_tail
        assert reader.end_pos == len(data)
    assert reader.events == len(walk.events) == len(top)
    assert dict(collections.Counter(e.header.type_code for e in top)) == walk.histogram()
    assert dict(collections.Counter(e.header.type_code for e in inner)) == dict(walk.inner)
    assert reader.inner_events == len(inner)
    fde = top[0]
    assert isinstance(fde, ev.FormatDescription)
    assert fde.has_crc32 == walk.crc
    body = MANIFEST.get(name)
    if body is None:
        return
    m = re.search(r"server version: `([^`]*)`", body)
    assert m is None or fde.server_version == m.group(1)
    checksum = re.search(r"Checksum: \*\*(\w+)", body).group(1)
    assert {"CRC32": 1, "OFF": 0, "none": 255}[checksum] == fde.checksum_alg
    events = int(re.search(r"\* Events: (\d+)", body).group(1))
    hist = _codes(re.search(r"histogram: ([^\n]*)", body).group(1))
    assert reader.events == events
    raw_hist = dict(collections.Counter(c for _, c, _ in walk.events))
    assert raw_hist == hist
    m = re.search(r"Inside TRANSACTION_PAYLOAD[^:]*: ([^\n]*)", body)
    assert dict(collections.Counter(e.header.type_code for e in inner)) == (
        _codes(m.group(1)) if m else {})
    m = re.search(r"must read exactly (\d+) events", body)
    if m:
        assert reader.events == int(m.group(1))


def test_every_file_is_accounted_for(corpus: Path) -> None:
    """Decoded, failing as expected, or partial: no other outcome, and the table says so."""
    outcome = collections.Counter()
    for name in FILES:
        try:
            reader, _, _ = _decode(corpus / name)
        except DecodeError:
            outcome["fails as expected" if name in EXPECTED_ERRORS else "FAILS"] += 1
            continue
        outcome["partial tail" if reader.partial_tail else "decoded"] += 1
    assert outcome == {"decoded": 109, "partial tail": 1, "fails as expected": 3}


# --- row values against mariadb-binlog ----------------------------------------------------

# The tool cannot read these files as they are; a synthetic binlog stands in (see below).
SYNTHETIC = {
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.compressed",
    BB + "transaction_compression.000001",
    BB + "binlog_transaction_with_GTID_TAG.000001",
    BB + "json-opaque.binlog",
    BB + "json.binlog.000001",
    BB + "vector.binlog",
}
# The tool cannot read these and no synthetic file helps; their rows are asserted by hand.
NO_TOOL = {
    BB + "ver_5_1-wl2325_r.001",  # 5.2 "-a_drop" event numbering (the tool has no permutation)
    BB + "ver_5_1-wl2325_s.001",
    BB + "bug40482-bin.000001",  # INCIDENT with the invalid number 66 (the bug's test file)
}


def _our_rows(path: Path) -> list[tuple[ev.RowsEvent, int, list | None, list | None]]:
    out = []
    for event in BinlogFileReader(str(path)):
        if isinstance(event, ev.RowsEvent):
            for i, (before, after) in enumerate(event.rows):
                out.append((event, event.row_base + i, before, after))
    return out


def _tool_rows(path: Path) -> tuple[list, list[dict[str, list[int]]] | None]:
    """The tool's row changes; for MINIMAL/NOBLOB images (``@N`` numbers with gaps, which
    ``binlog_verbose`` refuses) the ``@N`` are renumbered here and returned per change."""
    try:
        return read_row_changes(path), None
    except ValueError as exc:
        if "out of order" not in str(exc):
            raise
    text = run_mariadb_binlog(path).decode("utf-8", "surrogateescape")
    numbers: list[list[int]] = []
    lines = []
    for line in text.split("\n"):
        if line in ("### SET", "### WHERE"):
            numbers.append([])
        m = re.match(r"^###   @(\d+)=(.*)$", line)
        if m:
            numbers[-1].append(int(m.group(1)) - 1)
            line = f"###   @{len(numbers[-1])}={m.group(2)}"
        lines.append(line)
    parsed = parse_verbose("\n".join(lines), path.name)
    it = iter(numbers)
    columns = []
    for rc in parsed.changes:
        cols = {}
        if rc.before is not None:
            cols["before"] = next(it)
        if rc.after is not None:
            cols["after"] = next(it)
        columns.append(cols)
    return parsed.changes, columns


def _compare(ours: list, ref: list, columns: list | None, *, by_position: bool = True) -> None:
    assert len(ours) == len(ref), "row change counts differ"
    bad = []
    for k, ((event, idx, before, after), rc) in enumerate(zip(ours, ref)):
        if by_position:
            assert (event.header.pos, idx) == (rc.start_pos, rc.row_in_event)
        assert (event.kind, event.table.schema, event.table.table) == (
            rc.event_type, rc.schema, rc.table)
        tm = event.table
        uns = tm.unsigned
        if rc.column_types and len(rc.column_types) == tm.column_count:
            uns = [is_unsigned(t) for t in rc.column_types]
        for side, image, printed, types, present in (
                ("before", before, rc.before, rc.before_types, event.present_before),
                ("after", after, rc.after, rc.after_types, event.present_after)):
            assert (image is None) == (printed is None), (k, side)
            if image is None:
                continue
            idxs = [i for i in range(tm.column_count) if present is None or present[i]]
            if columns is not None:
                assert columns[k][side] == idxs, (k, side)
            assert len(idxs) == len(printed), (k, side)
            for i, text, comment in zip(idxs, printed, types):
                value = image[i]
                if tm.column_types[i] == 245 and value is not None:  # JSON retyped BLOB
                    text = json_binary_to_text(normalize_printed(text, comment)).encode()
                    if text != value:
                        bad.append((k, side, i, text, value))
                    continue
                if not printed_matches(text, comment, value, unsigned=uns[i] if uns else None):
                    bad.append((k, side, i, comment, text, value))
    assert not bad, f"{len(bad)} values differ, first: {bad[:3]}"


TOOL_FILES = [n for n in FILES if n not in EXPECTED_ERRORS and n not in SYNTHETIC
              and n not in NO_TOOL and n not in EXPECTED_PARTIAL]


@pytest.mark.parametrize("name", TOOL_FILES)
def test_rows_match_mariadb_binlog(corpus: Path, name: str) -> None:
    path = corpus / name
    ref, columns = _tool_rows(path)
    # Statements split over several rows events print their rows together; with gaps in the
    # @N numbers binlog_verbose cannot assign them to events, so those compare in order.
    positional = all(rc.start_pos >= 0 for rc in ref)
    _compare(_our_rows(path), ref, columns, by_position=positional)


def _synthetic(data: bytes, *, drop: set[int]) -> bytes:
    """A binlog the tool can read with the same row events: payloads unpacked, ``drop``
    types removed, JSON (245) and VECTOR (242) columns retyped BLOB (252, same 1-byte
    metadata), TABLE_MAP optional metadata cut (the tool rejects collation ids > 255);
    lengths, next positions and CRC32s recomputed."""
    walk = Walk(data)
    raws: list[bytes] = []
    for pos, code, raw in walk.events:
        if code in drop:
            continue
        if code == 40:
            raws.extend(e + b"\0\0\0\0" for e in walk.payloads[pos])  # CRC filled below
            continue
        raws.append(raw)
    out = bytearray(data[:4])
    for i, raw in enumerate(raws):
        raw = bytearray(raw)
        if raw[4] == 19:
            raw = _retype_table_map(raw, walk.crc)
        struct.pack_into("<I", raw, 9, len(raw))
        struct.pack_into("<I", raw, 13, len(out) + len(raw))
        if walk.crc and i:
            struct.pack_into("<I", raw, len(raw) - 4, zlib.crc32(bytes(raw[:-4])))
        out += raw
    return bytes(out)


def _retype_table_map(raw: bytearray, crc: bool) -> bytearray:
    body = raw[19:len(raw) - 4 if crc else len(raw)]
    p = 8
    p += body[p] + 2
    p += body[p] + 2
    ncols, p = _packed(bytes(body), p)
    for i in range(p, p + ncols):
        if body[i] in (242, 245):
            body[i] = 252
    p += ncols
    meta_len, p = _packed(bytes(body), p)
    end = p + meta_len + (ncols + 7) // 8
    return bytearray(raw[:19]) + body[:end] + (b"\0\0\0\0" if crc else b"")


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_rows_match_mariadb_binlog_on_a_synthetic_copy(corpus: Path, name: str,
                                                       tmp_path: Path) -> None:
    path = corpus / name
    one = tmp_path / "synthetic.000001"
    # PREVIOUS_GTIDS (tagged), GTID_TAGGED and PARTIAL_UPDATE_ROWS are unknown to the tool.
    one.write_bytes(_synthetic(path.read_bytes(), drop={35, 39, 42}))
    ref, columns = _tool_rows(one)
    ours = [r for r in _our_rows(path) if r[0].header.type_code != 39]
    _compare(ours, ref, columns, by_position=False)


# --- facts the origins assert, and expected/ outputs --------------------------------------

def _rows_of(path: Path) -> list[tuple[str, list | None, list | None]]:
    return [(e.kind, b, a) for e, _, b, a in _our_rows(path)]


def test_json_opaque_values(corpus: Path) -> None:
    """rust_mysql_common asserts these opaque JSON values (MySQL's printing: numbers bare)."""
    got = [a[0] for _, _, a in _rows_of(corpus / (BB + "json-opaque.binlog"))]
    assert got == [
        b'{"a": "base64:type15:VQ=="}', b'{"b": "2012-03-18"}',
        b'{"c": "2012-03-18 11:30:45.000000"}', b'{"c": "87:31:46.654321"}',
        b'{"d": 123.456}', b'{"e": 9.00}', b'{"e": [0, 1, true, false]}', b'{"e": null}',
    ]


def test_vector_values_are_float32_arrays(corpus: Path) -> None:
    rows = _rows_of(corpus / (BB + "vector.binlog"))
    first = rows[0][2]
    assert struct.unpack("<3f", first[1]) == pytest.approx((1.1, 2.2, 3.3))
    assert [r[0] for r in rows] == ["INSERT"] * 8 + ["DELETE", "INSERT"]
    for _, before, after in rows:
        for image in (before, after):
            for v in image[1::2] if image else ():
                assert v is None or len(v) % 4 == 0


def test_partial_json_update_with_minimal_before_image_is_flagged(corpus: Path) -> None:
    """json.binlog.000001 ends with JSON_SET(data, '$.age', ...) logged as PARTIAL_JSON
    diffs while the before image holds only the key: the after JSON is unknown, flagged."""
    events = [e for e in BinlogFileReader(str(corpus / (BB + "json.binlog.000001")))
              if isinstance(e, ev.RowsEvent) and e.header.type_code == 39]
    assert len(events) == 1
    e = events[0]
    assert e.partial_json_flags == [(1,)] * 6
    assert [a for _, a in e.rows][0] == [None, None, b"Joe", b"26"]
    assert e.present_before == [True, False, False, False]


def test_pre_ga_rows_of_a_5_2_development_tree(corpus: Path) -> None:
    """Hand-checked against the bytes: INSERT (0,'one'),(1,'two'); UPDATE a=a+1; DELETE."""
    rows = _rows_of(corpus / (BB + "ver_5_1-wl2325_r.001"))
    assert rows == [
        ("INSERT", None, [b"0", b"one"]), ("INSERT", None, [b"1", b"two"]),
        ("UPDATE", [b"0", b"one"], [b"1", b"one"]), ("UPDATE", [b"1", b"two"], [b"2", b"two"]),
        ("DELETE", [b"2", b"two"], None),
    ]
    kinds = [e.name for e in BinlogFileReader(str(corpus / (BB + "ver_5_1-wl2325_s.001")))]
    assert kinds.count("XID") == 1 and "TABLE_MAP" not in kinds


def test_incident_event(corpus: Path) -> None:
    incidents = [e for e in BinlogFileReader(str(corpus / (BB + "bug40482-bin.000001")))
                 if isinstance(e, ev.Incident)]
    assert [(i.header.pos, i.incident, i.message) for i in incidents] == [(106, 66, "")]


def test_tagged_gtids(corpus: Path) -> None:
    got = [e for e in BinlogFileReader(str(corpus / (BB + "binlog_transaction_with_GTID_TAG.000001")))
           if isinstance(e, (ev.Gtid, ev.PreviousGtids))]
    assert got[0].gtid_set == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    assert got[1].gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"


def test_payload_rows_keep_the_payload_position(corpus: Path) -> None:
    path = corpus / "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.compressed"
    rows = _our_rows(path)
    assert [(e.header.pos, e.header.event_length, i) for e, i, _, _ in rows] == [(236, 488, 0)]


def _mysql_decimal(text: str, prec: int, scale: int) -> str:
    """What MySQL stores for a quoted decimal literal: rounded half up, clamped to range."""
    with decimal.localcontext(decimal.Context(prec=100)):
        q = decimal.Decimal(1).scaleb(-scale)
        v = decimal.Decimal(text).quantize(q, rounding=decimal.ROUND_HALF_UP)
        top = decimal.Decimal(10) ** (prec - scale) - q
        v = max(min(v, top), -top)
        s = f"{abs(v) if v.is_zero() else v:f}"  # no negative zero
    return "0" + s if s.startswith(".") else s.replace("-.", "-0.")


def test_decimals_match_the_sql_that_made_them(corpus: Path) -> None:
    sql = (corpus / "go-mysql-org__go-mysql/expected/replication__t__ddsql.sql").read_text()
    cols = re.findall(r"v(\d+)_(\d+) decimal", sql)
    tuples = re.findall(r"^\((.*)\),?;?$", sql, re.M)
    rows = _rows_of(corpus / "go-mysql-org__go-mysql/replication__t__tcb-eval002c-bin.003320")
    assert len(rows) == len(tuples) > 10
    for (_, _, after), tup in zip(rows, tuples):
        values = re.findall(r'"([^"]*)"', tup)
        want = [_mysql_decimal(v, int(p), int(s)) for v, (p, s) in zip(values, cols)]
        assert [x.decode() for x in after[1:12]] == want


def test_queries_match_the_replication_listener_output(corpus: Path) -> None:
    out = (corpus / "mariadb-corporation__MaxScale/expected/"
           "replication_listener__tests__r__binlog_file_reader.result").read_text()
    want = re.findall(r"^query= (.*?) db= (\S*)\n", out, re.M | re.S)
    path = corpus / "mariadb-corporation__MaxScale/replication_listener__tests__std-data__searchbin.000001"
    # The listener prints every QUERY event except BEGIN/COMMIT.
    got = [(e.query.decode(), e.schema) for e in BinlogFileReader(str(path))
           if isinstance(e, ev.Query) and e.query not in (b"BEGIN", b"COMMIT")]
    # The listener test then reads other files (binlog_savepoint.000001 and friends).
    assert len(got) == 60 and want[:60] == got


def test_previous_gtids_match_mysqlbinlog(corpus: Path) -> None:
    out = (corpus / "ikarishinjieva__mysql_binlog_utils/expected/"
           "test__mysql-bin56-result.000002").read_text()
    want = re.search(r"# \tPrevious-GTIDs\n((?:# [0-9a-f-]+:[^\n]*\n)+)", out).group(1)
    want = "".join(line[2:] for line in want.splitlines())
    path = corpus / "ikarishinjieva__mysql_binlog_utils/test__mysql-bin56.000002"
    got = [e.gtid_set for e in BinlogFileReader(str(path)) if isinstance(e, ev.PreviousGtids)]
    assert got == [want]
