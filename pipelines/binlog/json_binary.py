"""MySQL binary JSON (the storage format of ``JSON`` columns, type 245) → JSON text.

Format (mysql-server ``sql/json_binary.h``)::

    doc    := type value                 (an empty document means JSON null)
    object := count size key-entry* value-entry* key* value*
    array  := count size value-entry* value*
    key-entry   := key-offset key-length(2)
    value-entry := type offset-or-inlined-value

``count``/``size``/offsets are 2 bytes little-endian in the *small* formats (types 0 object,
2 array) and 4 bytes in the *large* ones (1, 3). Offsets are relative to the container start
(after its type byte). Literals (null/true/false), int16 and uint16, and in the large formats
also int32 and uint32, are inlined in the value entry. Scalars: int16..uint64, double
(little-endian), string (variable-length size, 7 bits a byte, then UTF-8 bytes), opaque
(MySQL field type byte, variable-length size, data).

Printing follows MySQL (``Json_wrapper::to_string``): ``", "`` and ``": "`` separators, keys in
stored order, strings escaped as JSON, integers exact, doubles as Python ``repr`` (``3.0``,
``1e+100``), opaque DECIMAL as an exact number, opaque DATE/TIME/DATETIME/TIMESTAMP as quoted
``my_TIME_to_str(..., 6)`` text, other opaque values as ``"base64:type<N>:<base64>"`` (MySQL's
``base64_encode`` breaks lines every 76 characters; the newline is printed escaped as ``\\n``
so the output stays valid JSON).
"""

from __future__ import annotations

import base64
import struct
from json.encoder import encode_basestring  # the C implementation when available

from pipelines.binlog import coltypes
from pipelines.binlog.decimal_codec import decimal_text
from pipelines.binlog.temporal import json_temporal_text
from pipelines.errors import DecodeError, ValueDecodeError

__all__ = ["json_binary_to_text"]

SMALL_OBJECT = 0x00
LARGE_OBJECT = 0x01
SMALL_ARRAY = 0x02
LARGE_ARRAY = 0x03
LITERAL = 0x04
INT16 = 0x05
UINT16 = 0x06
INT32 = 0x07
UINT32 = 0x08
INT64 = 0x09
UINT64 = 0x0A
DOUBLE = 0x0B
STRING = 0x0C
OPAQUE = 0x0F

_MAX_DEPTH = 150  # MySQL refuses documents deeper than 100
_LITERALS = {0: "null", 1: "true", 2: "false"}
_INLINE_SMALL = frozenset({LITERAL, INT16, UINT16})
_INLINE_LARGE = frozenset({LITERAL, INT16, UINT16, INT32, UINT32})
_TEMPORAL_OPAQUE = frozenset({coltypes.DATE, coltypes.TIME, coltypes.DATETIME, coltypes.TIMESTAMP})

_SCALAR = {
    INT16: struct.Struct("<h"),
    UINT16: struct.Struct("<H"),
    INT32: struct.Struct("<i"),
    UINT32: struct.Struct("<I"),
    INT64: struct.Struct("<q"),
    UINT64: struct.Struct("<Q"),
}
_INT_UNPACK = {t: (s.unpack_from, s.size) for t, s in _SCALAR.items()}
_unpack_d = struct.Struct("<d").unpack_from
_unpack_hh = struct.Struct("<HH").unpack_from
_unpack_ii = struct.Struct("<II").unpack_from
_unpack_h = struct.Struct("<H").unpack_from
_unpack_i = struct.Struct("<I").unpack_from
_unpack_key_small = struct.Struct("<HH").unpack_from
_unpack_key_large = struct.Struct("<IH").unpack_from


class _Bad(Exception):
    """Internal: malformed document; carries the reason and the offset of the problem."""

    def __init__(self, reason: str, pos: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pos = pos


def json_binary_to_text(data: bytes) -> str:
    """Print a MySQL binary JSON document as JSON text the way MySQL does.

    An empty ``data`` is JSON ``null`` (MySQL writes a zero-length value for it in some
    cases). Raises :class:`ValueDecodeError` with a hex preview around the problem for a bad
    type byte, an offset or size out of range, invalid UTF-8, a non-finite double or a
    document nested deeper than MySQL allows.
    """
    if not data:
        return "null"
    data = bytes(data)
    out: list[str] = []
    try:
        _value(data, data[0], 1, len(data), out, 0)
    except _Bad as bad:
        raise ValueDecodeError(
            f"JSON: {bad.reason} at offset {bad.pos} of a {len(data)}-byte document",
            preview=data[max(bad.pos - 8, 0):bad.pos + 24],
        ) from None
    except DecodeError as exc:  # a bad opaque DECIMAL
        raise ValueDecodeError(f"JSON: {exc.reason}", preview=exc.preview or data) from None
    except (struct.error, IndexError):
        raise ValueDecodeError(
            f"JSON: a value runs past the end of the {len(data)}-byte document",
            preview=data[:32],
        ) from None
    return "".join(out)


def _value(data: bytes, t: int, pos: int, end: int, out: list[str], depth: int) -> None:
    """Append the text of the value of type ``t`` stored at ``data[pos:end]`` to ``out``."""
    if t == STRING:
        n, p = _varlen(data, pos, end)
        if p + n > end:
            raise _Bad("string runs past its container", pos)
        try:
            out.append(encode_basestring(data[p:p + n].decode("utf-8")))
        except UnicodeDecodeError:
            raise _Bad("string is not valid UTF-8", p) from None
    elif t in _INT_UNPACK:
        unpack, size = _INT_UNPACK[t]
        if pos + size > end:
            raise _Bad("integer runs past its container", pos)
        out.append(str(unpack(data, pos)[0]))
    elif t <= LARGE_ARRAY:
        if depth >= _MAX_DEPTH:
            raise _Bad(f"document nested deeper than {_MAX_DEPTH}", pos)
        _container(data, t, pos, end, out, depth + 1)
    elif t == LITERAL:
        if pos >= end:
            raise _Bad("literal runs past its container", pos)
        text = _LITERALS.get(data[pos])
        if text is None:
            raise _Bad(f"bad literal byte 0x{data[pos]:02x}", pos)
        out.append(text)
    elif t == DOUBLE:
        if pos + 8 > end:
            raise _Bad("double runs past its container", pos)
        v = _unpack_d(data, pos)[0]
        if v - v != 0.0:  # inf or nan: not JSON, and MySQL never stores them
            raise _Bad(f"non-finite double {v!r}", pos)
        out.append(repr(v))
    elif t == OPAQUE:
        out.append(_opaque(data, pos, end))
    else:
        raise _Bad(f"bad value type byte 0x{t:02x}", pos - 1 if pos else pos)


def _container(data: bytes, t: int, pos: int, end: int, out: list[str], depth: int) -> None:
    """Objects and arrays, small (2-byte offsets) or large (4-byte offsets)."""
    large = t & 1
    if large:
        w = 4
        if pos + 8 > end:
            raise _Bad("container header runs past the document", pos)
        count, size = _unpack_ii(data, pos)
        inline = _INLINE_LARGE
        unpack_off = _unpack_i
        unpack_key = _unpack_key_large
    else:
        w = 2
        if pos + 4 > end:
            raise _Bad("container header runs past the document", pos)
        count, size = _unpack_hh(data, pos)
        inline = _INLINE_SMALL
        unpack_off = _unpack_h
        unpack_key = _unpack_key_small
    cend = pos + size
    if cend > end:
        raise _Bad(f"container size {size} exceeds the space left ({end - pos})", pos)
    is_object = t <= LARGE_OBJECT
    entries = pos + 2 * w
    values = entries + count * (w + 2) if is_object else entries
    header_end = values + count * (1 + w)
    if header_end > cend:
        raise _Bad(f"{count} entries do not fit in a {size}-byte container", pos)
    if count == 0:
        out.append("{}" if is_object else "[]")
        return
    out.append("{" if is_object else "[")
    append = out.append
    for i in range(count):
        if i:
            append(", ")
        if is_object:
            koff, klen = unpack_key(data, entries + i * (w + 2))
            kstart = pos + koff
            if koff < header_end - pos or kstart + klen > cend:
                raise _Bad(f"key offset {koff}/length {klen} out of range", entries + i * (w + 2))
            try:
                append(encode_basestring(data[kstart:kstart + klen].decode("utf-8")))
            except UnicodeDecodeError:
                raise _Bad("key is not valid UTF-8", kstart) from None
            append(": ")
        e = values + i * (1 + w)
        vt = data[e]
        if vt in inline:
            _value(data, vt, e + 1, e + 1 + w, out, depth)
        else:
            (voff,) = unpack_off(data, e + 1)
            if voff < header_end - pos or voff >= size:
                raise _Bad(f"value offset {voff} out of range", e)
            _value(data, vt, pos + voff, cend, out, depth)
    append("}" if is_object else "]")


def _varlen(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Variable-length size: 7 bits a byte, least significant first, high bit = more."""
    n = 0
    for i in range(5):
        if pos >= end:
            raise _Bad("size runs past its container", pos)
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n, pos
    raise _Bad("variable-length size longer than 5 bytes", pos - 5)


def _opaque(data: bytes, pos: int, end: int) -> str:
    """Opaque value: DECIMAL as a number, temporals quoted, anything else base64."""
    if pos >= end:
        raise _Bad("opaque value runs past its container", pos)
    ftype = data[pos]
    n, p = _varlen(data, pos + 1, end)
    if p + n > end:
        raise _Bad("opaque value runs past its container", pos)
    payload = data[p:p + n]
    if ftype == coltypes.NEWDECIMAL:
        if n < 2:
            raise _Bad("opaque DECIMAL without precision and scale", pos)
        return decimal_text(payload, 2, payload[0], payload[1])[0]
    if ftype in _TEMPORAL_OPAQUE:
        if n < 8:
            raise _Bad(f"opaque {coltypes.name(ftype)} shorter than 8 bytes", pos)
        packed = int.from_bytes(payload[:8], "little", signed=True)
        return '"' + json_temporal_text(ftype, packed) + '"'
    b64 = base64.b64encode(payload).decode("ascii")
    if len(b64) > 76:  # MySQL's base64_encode: a newline every 76 characters
        b64 = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
    return encode_basestring(f"base64:type{ftype}:{b64}")
