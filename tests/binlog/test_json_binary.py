"""MySQL binary JSON → text (pipelines.binlog.json_binary).

Hand-annotated hex documents (format: mysql-server sql/json_binary.h), a small *encoder*
written here from that description for property tests and large (> 64 KiB) documents, and
malformed documents that must raise ValueDecodeError with a hex preview.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.binlog.json_binary import json_binary_to_text
from pipelines.errors import ValueDecodeError


def _raw(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr.replace(" ", ""))


CASES = [
    ("", "null"),  # zero-length value = JSON null
    ("04 00", "null"),  # literal null
    ("04 01", "true"),
    ("04 02", "false"),
    ("05 ffff", "-1"),  # int16
    ("05 0080", "-32768"),
    ("06 ffff", "65535"),  # uint16
    ("07 00000080", "-2147483648"),  # int32
    ("08 ffffffff", "4294967295"),  # uint32
    ("09 0000000000000080", "-9223372036854775808"),  # int64
    ("0a ffffffffffffffff", "18446744073709551615"),  # uint64, exact
    ("0b 0000000000000440", "2.5"),  # double
    ("0b 0000000000000840", "3.0"),  # a whole double keeps its ".0"
    ("0b 7dc39425ad49b254", "1e+100"),
    ("0b 9a9999999999b93f", "0.1"),
    ("0c 01 78", '"x"'),  # string: varlen size 1, "x"
    ("0c 00", '""'),
    # "a\"b\\<LF><U+0001>é": 8 bytes of UTF-8, escaped like MySQL prints it
    ("0c 08 61225c620a01c3a9", '"a\\"\\\\b\\n\\u0001é"'),
    ("02 0000 0400", "[]"),  # small array: count 0, size 4
    ("00 0000 0400", "{}"),  # small object
    ("03 00000000 08000000", "[]"),  # large array
    # {"a": 1, "b": [1, 2.5, "x"]}: small object, count 2, size 43
    ("00 0200 2b00"
     " 1200 0100  1300 0100"  # key entries: "a" at 18, "b" at 19 (length 1 each)
     " 05 0100  02 1400"  # values: int16 1 inlined; small array at offset 20
     " 61 62"  # keys
     " 0300 1700"  # array: count 3, size 23
     " 05 0100  0b 0d00  0c 1500"  # 1 inlined; double at 13; string at 21
     " 0000000000000440  01 78",  # 2.5, "x"
     '{"a": 1, "b": [1, 2.5, "x"]}'),
    # [null, true, false, -2] small array: literals and int16 all inlined
    ("02 0400 1000  04 0000  04 0100  04 0200  05 feff", "[null, true, false, -2]"),
    # large array [7, 65536]: 4-byte counts/offsets; int32/uint32 inlined in large format
    ("03 02000000 12000000  07 07000000  08 00000100", "[7, 65536]"),
    # opaque DECIMAL: CAST(3.14 AS JSON) -> field type 246, size 4, precision 3, scale 2,
    # binary DECIMAL(3,2): int 1 digit (1 byte 0x03), frac 2 digits (0x0e), sign bit set
    ("0f f6 04 0302830e", "3.14"),
    ("0f f6 03 01017a", "-0.5"),  # DECIMAL(1,1) -0.5: 0x05 ^ 0x80, inverted
    # opaque DATETIME (12): CAST(TIMESTAMP'2015-01-15 23:24:25' AS JSON), packed int64 LE
    ("0f 0c 08 00000019761f9519", '"2015-01-15 23:24:25.000000"'),
    ("0f 07 08 00000019761f9519", '"2015-01-15 23:24:25.000000"'),  # TIMESTAMP
    ("0f 0a 08 00000000001e9519", '"2015-01-15"'),  # DATE
    ("0f 0b 08 20a1071976010000", '"23:24:25.500000"'),  # TIME 23:24:25.5
    ("0f 0b 08 00000000f0ffffff", '"-01:00:00.000000"'),  # TIME -01:00:00
    ("0f 10 01 55", '"base64:type16:VQ=="'),  # other opaque (BIT): base64 with the type
    # {"d": <opaque decimal>}: an opaque value inside an object
    ("00 0100 1200  0b00 0100  0f 0c00  64  f6 04 0302830e", '{"d": 3.14}'),
]


@pytest.mark.parametrize("hexstr,text", CASES)
def test_document(hexstr: str, text: str) -> None:
    assert json_binary_to_text(_raw(hexstr)) == text


BAD = [
    ("0e 00", "type byte"),  # 0x0e is not a type
    ("04 03", "literal"),
    ("05 ff", "past"),  # int16 cut short
    ("0c 05 6162", "string"),  # size 5, 2 bytes left
    ("0c 02 c328", "UTF-8"),
    ("0c ffffffffff01", "longer than 5"),  # varlen size over 5 bytes
    ("02 0100 2000  05 0100", "size"),  # container size 32 > document
    ("02 0100 0700  0c 4000", "offset"),  # value offset 64 outside a 7-byte array
    ("02 0300 0700  05 0100", "entries"),  # 3 value entries do not fit in 7 bytes
    ("00 0100 0c00  0b00 0900  05 0100  61", "key offset"),  # key length runs past the end
    ("0f f6 01 03", "DECIMAL"),  # opaque decimal without scale
    ("0f f6 04 0302ff0e", "DECIMAL"),  # digit group 127 > 1 digit
    ("0f 0c 02 0000", "shorter than 8"),
    ("0b 000000000000f07f", "non-finite"),  # +inf
]


@pytest.mark.parametrize("hexstr,reason", BAD)
def test_malformed_document_raises(hexstr: str, reason: str) -> None:
    with pytest.raises(ValueDecodeError) as info:
        json_binary_to_text(_raw(hexstr))
    assert reason in str(info.value)
    assert info.value.preview  # hex preview for the error message


def test_too_deep_raises() -> None:
    doc = b"\x02"
    inner = b"\x02\x00\x00\x04\x00"  # []
    for _ in range(200):  # [[[...]]]: each level one array entry at offset 7
        inner = b"\x01\x00" + struct.pack("<H", 7 + len(inner)) + b"\x02\x07\x00" + inner
    with pytest.raises(ValueDecodeError, match="deeper"):
        json_binary_to_text(doc + inner)


# --- an encoder from the format description ------------------------------------------------

@dataclass(frozen=True)
class Opaque:
    field_type: int
    payload: bytes


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _scalar(v) -> tuple[int, bytes]:
    """(type, bytes) of a non-container value."""
    if v is None or isinstance(v, bool):
        return 0x04, bytes([0 if v is None else 1 if v else 2])
    if isinstance(v, int):
        for t, fmt in ((0x05, "<h"), (0x06, "<H"), (0x07, "<i"), (0x08, "<I"), (0x09, "<q"),
                       (0x0A, "<Q")):
            try:
                return t, struct.pack(fmt, v)
            except struct.error:
                continue
        raise ValueError(v)
    if isinstance(v, float):
        return 0x0B, struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return 0x0C, _varlen(len(b)) + b
    if isinstance(v, Opaque):
        return 0x0F, bytes([v.field_type]) + _varlen(len(v.payload)) + v.payload
    raise TypeError(type(v))


def _encode(v) -> tuple[int, bytes]:
    if isinstance(v, (dict, list)):
        try:
            return _container(v, large=False)
        except struct.error:  # an offset or size over 0xFFFF: the large format
            return _container(v, large=True)
    return _scalar(v)


def _container(v, large: bool) -> tuple[int, bytes]:
    is_obj = isinstance(v, dict)
    w, off = (4, "<I") if large else (2, "<H")
    items = list(v.items()) if is_obj else [(None, x) for x in v]
    n = len(items)
    header = 2 * w + (n * (w + 2) if is_obj else 0) + n * (1 + w)
    keys = [k.encode("utf-8") for k, _ in items] if is_obj else []
    body = bytearray(b"".join(keys))
    key_entries = bytearray()
    pos = header
    for k in keys:
        key_entries += struct.pack(off, pos) + struct.pack("<H", len(k))
        pos += len(k)
    value_entries = bytearray()
    inline = {0x04, 0x05, 0x06} | ({0x07, 0x08} if large else set())
    for _, x in items:
        t, b = _encode(x)
        if t in inline:
            value_entries += bytes([t]) + b.ljust(w, b"\0")
        else:
            value_entries += bytes([t]) + struct.pack(off, header + len(body))
            body += b
    size = header + len(body)
    hdr = struct.pack(off, n) + struct.pack(off, size)
    t = (0x00 if is_obj else 0x02) | (1 if large else 0)
    return t, hdr + key_entries + value_entries + body


def encode(v) -> bytes:
    t, b = _encode(v)
    return bytes([t]) + b


def test_encoder_matches_hand_written_document() -> None:
    hand = {text: hexstr for hexstr, text in CASES}['{"a": 1, "b": [1, 2.5, "x"]}']
    assert encode({"a": 1, "b": [1, 2.5, "x"]}) == _raw(hand)


def test_large_documents_use_the_large_format() -> None:
    big = "é" * 40000  # 80000 bytes of UTF-8
    doc = {"k": big, "n": [1, 2, {"deep": [True, None, -7, 1.5]}], "u": 2**64 - 1}
    data = encode(doc)
    assert data[0] == 0x01  # large object
    assert len(data) > 65536
    assert json_binary_to_text(data) == json.dumps(doc, ensure_ascii=False)
    arr = encode([big, "tail", 70000, -70000])
    assert arr[0] == 0x03  # large array; int32 values inlined
    assert json_binary_to_text(arr) == f'["{big}", "tail", 70000, -70000]'


def test_opaque_values_inside_containers() -> None:
    doc = [Opaque(246, bytes.fromhex("0302830e")), {"t": Opaque(12, _raw("00000019761f9519"))},
           Opaque(15, b"\x00" * 60)]
    b64 = "A" * 76 + "\\n" + "A" * 4  # MySQL's base64 breaks lines every 76 characters
    assert json_binary_to_text(encode(doc)) == (
        f'[3.14, {{"t": "2015-01-15 23:24:25.000000"}}, "base64:type15:{b64}"]')


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6)
    | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=40,
)


@given(_json_values)
@settings(max_examples=800)
def test_round_trip_matches_json_dumps(value) -> None:
    # json.dumps' defaults are MySQL's style: ", " / ": " separators, repr() for floats.
    assert json_binary_to_text(encode(value)) == json.dumps(value, ensure_ascii=False)


# --- real documents: MySQL 9.0 json-opaque.binlog (blackbeam/rust_mysql_common) --------------

OPAQUE_FILE = "/work/shared/corpus/blackbeam__rust_mysql_common/test-data__binlogs__json-opaque.binlog"
REAL = [
    ("0001000f000b0001000f0c00610f0155", '{"a": "base64:type15:VQ=="}'),  # VARCHAR opaque
    ("00010016000b0001000f0c00620a080000000000e48b19", '{"b": "2012-03-18"}'),
    ("00010016000b0001000f0c00630c08000000adb7e48b19", '{"c": "2012-03-18 11:30:45.000000"}'),
    ("00010016000b0001000f0c00630b08f1fb09ee77050000", '{"c": "87:31:46.654321"}'),
    ("00010014000b0001000f0c0064f6060603807b01c8", '{"d": 123.456}'),
    ("00010015000b0001000f0c0065f6070b028000000900", '{"e": 9.00}'),
    ("0001001c000b000100020c006504001000050000050100040100040200", '{"e": [0, 1, true, false]}'),
    ("0001000c000b00010004000065", '{"e": null}'),
]


@pytest.mark.parametrize("hexstr,text", REAL)
def test_real_document(hexstr: str, text: str) -> None:
    assert json_binary_to_text(_raw(hexstr)) == text


def test_real_documents_come_from_the_corpus() -> None:
    import os

    if not os.path.exists(OPAQUE_FILE):
        pytest.fail(f"corpus file missing: {OPAQUE_FILE}")
    with open(OPAQUE_FILE, "rb") as fh:
        data = fh.read()
    for hexstr, _ in REAL:
        assert _raw(hexstr) in data
