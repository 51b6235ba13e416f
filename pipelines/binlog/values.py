"""Per-type decoders for one non-NULL column value of a binlog row image → bronze bytes.

:func:`column_decoder` is called once per column of a table and returns a small closure
``dec(buf, pos) -> (value_bytes, new_pos)``. These closures are the reference decoding: the
hot row loops are generated code (``rowcodegen.py``) that inlines the common types with the
same output and calls the closures for the others. Output bytes follow the contract in ``docs/bronze.md`` (ASCII decimal
numbers, exact decimal text, formatted temporal text, raw bytes for strings/blobs, JSON text).

Errors: a decoder raises :class:`~pipelines.errors.TruncatedError` when the value runs past
the end of ``buf`` and :class:`~pipelines.errors.ValueDecodeError` for malformed bytes. A type
code that cannot be decoded (pre-5.0 ``DECIMAL``, ``TYPED_ARRAY``, unknown codes) or impossible
metadata does not fail :func:`column_decoder` itself: the returned decoder raises
:class:`~pipelines.errors.ValueDecodeError` when a value actually has to be decoded, so a table
whose odd column is always NULL (or absent from a MINIMAL image) still decodes. The caller adds
file/position to the error (``DecodeError.located``).

``buf`` must be ``bytes`` (slicing a ``memoryview`` would return views).
"""

from __future__ import annotations

import struct
from typing import Callable

from pipelines.binlog import coltypes
from pipelines.binlog.decimal_codec import decimal_decoder
from pipelines.binlog.json_binary import json_binary_to_text
from pipelines.binlog.temporal import temporal_decoder
from pipelines.errors import TruncatedError, ValueDecodeError

__all__ = ["Decoder", "column_decoder", "float32_text"]

Decoder = Callable[[bytes, int], "tuple[bytes, int]"]

_TEMPORAL = frozenset({
    coltypes.DATE, coltypes.TIME, coltypes.TIME2, coltypes.DATETIME, coltypes.DATETIME2,
    coltypes.TIMESTAMP, coltypes.TIMESTAMP2, coltypes.YEAR,
})

# ASCII text of every byte value, signed and unsigned (TINY, ENUM pack 1, BIT(1..8), SET 1).
_U8 = tuple(b"%d" % i for i in range(256))
_S8 = tuple(b"%d" % (i - 256 if i > 127 else i) for i in range(256))


def _truncated(col_type: int, buf: bytes, pos: int, need: int) -> TruncatedError:
    return TruncatedError(
        f"{coltypes.name(col_type)} value needs {need} bytes at offset {pos}, "
        f"{max(len(buf) - pos, 0)} left",
        preview=buf[pos:pos + 32],
    )


def _failing(message: str) -> Decoder:
    """A decoder that always raises ValueDecodeError(message) (unsupported type/metadata)."""
    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        raise ValueDecodeError(message, preview=buf[pos:pos + 32])
    return dec


# --- integers and other fixed-width little-endian numbers ---------------------------------

def _byte_table(col_type: int, table: tuple[bytes, ...]) -> Decoder:
    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        try:
            return table[buf[pos]], pos + 1
        except IndexError:
            raise _truncated(col_type, buf, pos, 1) from None
    return dec


def _struct_int(col_type: int, fmt: str) -> Decoder:
    """Integer read with one ``struct`` format (a single field) → ASCII decimal."""
    st = struct.Struct(fmt)
    unpack = st.unpack_from
    size = st.size

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        try:
            return b"%d" % unpack(buf, pos), pos + size
        except struct.error:
            raise _truncated(col_type, buf, pos, size) from None
    return dec


def _int24(signed: bool) -> Decoder:
    unpack = struct.Struct("<Hb" if signed else "<HB").unpack_from
    T = coltypes.INT24

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        try:
            lo, hi = unpack(buf, pos)
        except struct.error:
            raise _truncated(T, buf, pos, 3) from None
        return b"%d" % (hi << 16 | lo), pos + 3
    return dec


def _uint_bytes(col_type: int, size: int, order: str) -> Decoder:
    """Unsigned integer of ``size`` bytes with no struct format (3, 5, 6, 7 bytes)."""
    from_bytes = int.from_bytes

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + size
        if end > len(buf):
            raise _truncated(col_type, buf, pos, size)
        return b"%d" % from_bytes(buf[pos:end], order), end
    return dec


_UINT_FMT = {2: "H", 4: "I", 8: "Q"}


def _unsigned(col_type: int, size: int, order: str) -> Decoder:
    """Unsigned integer of 1..8 bytes in byte order ``order`` ("little" / "big")."""
    if size == 1:
        return _byte_table(col_type, _U8)
    if size in _UINT_FMT:
        return _struct_int(col_type, ("<" if order == "little" else ">") + _UINT_FMT[size])
    return _uint_bytes(col_type, size, order)


# --- floating point ----------------------------------------------------------------------

_FLT_MIN = 1.1754943508222875e-38  # smallest normal float32
_INF = float("inf")
_NINF = float("-inf")
_FMTS_NORMAL = ("%.6g", "%.7g", "%.8g", "%.9g")
_FMTS_ALL = tuple(f"%.{p}g" for p in range(1, 10))
_pack_f = struct.Struct("<f").pack
_unpack_f = struct.Struct("<f").unpack


def float32_text(v: float) -> str:
    """Shortest decimal text that reads back (text → double → float32) as the float32 ``v``.

    Printed like Python's ``repr`` of that decimal (``1.1``, ``-3.4028235e+38``, ``0.0``,
    ``16777216.0``, ``1e-45``); ``inf``/``nan`` (which MySQL never stores) as ``repr``.
    For normal numbers trying ``%.6g`` first is safe: a float32's half-ulp is below half a
    unit of the 6th significant digit, so if any shorter text round-trips, ``%.6g`` (which
    drops trailing zeros) already yields it. Zero and subnormals try every precision from 1.
    """
    if v != v or v in (_INF, _NINF):
        return repr(v)
    raw = _pack_f(v)
    for fmt in (_FMTS_NORMAL if abs(v) >= _FLT_MIN else _FMTS_ALL):
        f = float(fmt % v)
        try:
            if _pack_f(f) == raw:
                return repr(f)
        except OverflowError:  # a decimal just above FLT_MAX
            pass
    return repr(v)  # unreachable: 9 significant digits always round-trip a float32


def _float(buf: bytes, pos: int, _unpack=_unpack_f, _pack=_pack_f) -> tuple[bytes, int]:
    end = pos + 4
    raw = buf[pos:end]
    try:
        (v,) = _unpack(raw)  # unpack (not unpack_from) also rejects a short slice
    except struct.error:
        raise _truncated(coltypes.FLOAT, buf, pos, 4) from None
    if abs(v) >= _FLT_MIN:  # normal (also rules out nan)
        for fmt in _FMTS_NORMAL:
            f = float(fmt % v)
            try:
                if _pack(f) == raw:
                    return repr(f).encode("ascii"), end
            except OverflowError:
                pass
    return float32_text(v).encode("ascii"), end


def _double(buf: bytes, pos: int, _unpack=struct.Struct("<d").unpack_from) -> tuple[bytes, int]:
    try:
        (v,) = _unpack(buf, pos)
    except struct.error:
        raise _truncated(coltypes.DOUBLE, buf, pos, 8) from None
    return repr(v).encode("ascii"), pos + 8


# --- strings, blobs, JSON ----------------------------------------------------------------

def _prefixed1(col_type: int) -> Decoder:
    """1-byte length prefix, then that many raw bytes."""
    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        try:
            start = pos + 1
            end = start + buf[pos]
        except IndexError:
            raise _truncated(col_type, buf, pos, 1) from None
        if end > len(buf):
            raise _truncated(col_type, buf, pos, end - pos)
        return buf[start:end], end
    return dec


def _prefixed(col_type: int, width: int) -> Decoder:
    """``width``-byte (1..4) little-endian length prefix, then that many raw bytes."""
    if width == 1:
        return _prefixed1(col_type)
    if width == 3:
        unpack3 = struct.Struct("<HB").unpack_from

        def length(buf: bytes, pos: int) -> int:
            lo, hi = unpack3(buf, pos)
            return hi << 16 | lo
    else:
        unpack = struct.Struct("<H" if width == 2 else "<I").unpack_from

        def length(buf: bytes, pos: int) -> int:
            return unpack(buf, pos)[0]

    if width == 2:
        # The common VARCHAR > 255 / BLOB case, with the length read inlined.
        def dec2(buf: bytes, pos: int) -> tuple[bytes, int]:
            try:
                (n,) = unpack(buf, pos)
            except struct.error:
                raise _truncated(col_type, buf, pos, 2) from None
            start = pos + 2
            end = start + n
            if end > len(buf):
                raise _truncated(col_type, buf, pos, end - pos)
            return buf[start:end], end
        return dec2

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        try:
            n = length(buf, pos)
        except struct.error:
            raise _truncated(col_type, buf, pos, width) from None
        start = pos + width
        end = start + n
        if end > len(buf):
            raise _truncated(col_type, buf, pos, end - pos)
        return buf[start:end], end
    return dec


def _json(width: int) -> Decoder:
    raw = _prefixed(coltypes.JSON, width)

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        data, end = raw(buf, pos)
        return json_binary_to_text(data).encode("utf-8"), end
    return dec


# --- dispatch ----------------------------------------------------------------------------

def _null(buf: bytes, pos: int) -> tuple[bytes, int]:
    """MYSQL_TYPE_NULL occupies no bytes (its values are always NULL in the bitmap)."""
    return b"", pos


def column_decoder(col_type: int, meta: int, unsigned: bool | None) -> Decoder:
    """Return a fast function ``dec(buf, pos) -> (value_bytes, new_pos)`` for one non-NULL value.

    ``col_type`` and ``meta`` are normalised as in docs/bronze.md (ENUM/SET resolved from
    STRING, STRING meta = max length in bytes, BIT meta = number of bits, NEWDECIMAL meta =
    ``precision << 8 | scale``, BLOB-like meta = length-prefix size). ``unsigned`` selects the
    unsigned reading of integer columns; ``None`` (signedness not logged) reads them signed.

    Never raises for an unsupported type or bad metadata: the returned decoder raises
    :class:`ValueDecodeError` naming the type when called (see the module docstring).
    """
    T = coltypes
    tname = T.name(col_type)
    if col_type in T.INTEGER_TYPES:
        signed = not unsigned
        if col_type == T.TINY:
            return _byte_table(col_type, _S8 if signed else _U8)
        if col_type == T.INT24:
            return _int24(signed)
        fmt = {T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q"}[col_type]
        return _struct_int(col_type, "<" + (fmt if signed else fmt.upper()))
    if col_type in coltypes.VARCHAR_LIKE:
        if meta < 0 or meta > 0xFFFF:
            return _failing(f"{tname}: impossible max length {meta}")
        return _prefixed(col_type, 1 if meta < 256 else 2)
    if col_type in coltypes.BLOB_LIKE or col_type == T.JSON:
        if not 1 <= meta <= 4:
            return _failing(f"{tname}: length-prefix size {meta} not in 1..4")
        return _json(meta) if col_type == T.JSON else _prefixed(col_type, meta)
    if col_type == T.NEWDECIMAL:
        try:
            return decimal_decoder(meta >> 8, meta & 0xFF)
        except ValueDecodeError as exc:
            return _failing(exc.reason)
    if col_type in _TEMPORAL:
        try:
            return temporal_decoder(col_type, meta)
        except ValueDecodeError as exc:
            return _failing(exc.reason)
    if col_type == T.FLOAT:
        return _float
    if col_type == T.DOUBLE:
        return _double
    if col_type == T.BIT:
        if not 1 <= meta <= 64:
            return _failing(f"BIT: number of bits {meta} not in 1..64")
        return _unsigned(col_type, (meta + 7) // 8, "big")
    if col_type == T.ENUM:
        if meta not in (1, 2):
            return _failing(f"ENUM: pack length {meta} not 1 or 2")
        return _unsigned(col_type, meta, "little")
    if col_type == T.SET:
        if not 1 <= meta <= 8:
            return _failing(f"SET: pack length {meta} not in 1..8")
        return _unsigned(col_type, meta, "little")
    if col_type == T.NULL:
        return _null
    return _failing(f"unsupported column type {tname} ({col_type}) in a row image")
