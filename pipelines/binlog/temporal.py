"""Decoders for MySQL temporal column values (binlog row images) → formatted text bytes.

Formats (MySQL ``sql-common/my_time.cc`` and ``sql/field.cc``):

* ``DATE`` (10): 3 bytes little-endian, ``day | month << 5 | year << 9``.
* ``TIME`` (11, pre-5.6): 3 bytes signed little-endian integer ``±HHMMSS``.
* ``DATETIME`` (12, pre-5.6): 8 bytes little-endian integer ``YYYYMMDDhhmmss``.
* ``TIMESTAMP`` (7, pre-5.6): 4 bytes little-endian seconds since the epoch (UTC).
* ``TIMESTAMP2`` (17): 4 bytes big-endian seconds, then the fraction.
* ``DATETIME2`` (18): 5 bytes big-endian, ``0x8000000000 +`` (sign bit, ``year*13+month`` 17
  bits, day 5, hour 5, minute 6, second 6), then the fraction.
* ``TIME2`` (19): 3 bytes big-endian, ``0x800000 +`` (sign, hour 10 bits, minute 6, second 6),
  then the fraction.
* Fraction: ``(fsp + 1) // 2`` big-endian bytes holding hundredths (1 byte), hundreds of
  microseconds (2 bytes) or microseconds (3 bytes). A negative TIME2 stores integer part and
  fraction as *one* two's-complement number (``my_time_packed_from_binary``), so reading all
  ``3 + frac`` bytes as a single integer minus ``0x800000 << 8*frac_bytes`` gives minus the
  absolute value, which is what we print.

Hot path notes: results are assembled from precomputed pieces (``:MM:SS`` tables, a bounded
cache of ``YYYY-MM-DD HH`` prefixes) because ``%``-formatting six fields per value costs more
than a dict hit.
"""

from __future__ import annotations

import datetime as _dt
import struct
from typing import Callable

from pipelines.binlog import coltypes
from pipelines.errors import TruncatedError, ValueDecodeError

__all__ = ["temporal_decoder", "year_decoder", "json_temporal_text"]

Decoder = Callable[[bytes, int], "tuple[bytes, int]"]

# b':MM:SS' indexed by minute << 6 | second (bit-packed DATETIME2/TIME2 layout).
_MS_BITS = tuple(b":%02d:%02d" % (i >> 6, i & 63) for i in range(4096))
# b':MM:SS' indexed by seconds within the hour (epoch-second TIMESTAMPs).
_MS_SECS = tuple(b":%02d:%02d" % divmod(i, 60) for i in range(3600))
_CACHE_MAX = 1 << 16
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_from_bytes = int.from_bytes


def _truncated(col_type: int, buf: bytes, pos: int, need: int) -> TruncatedError:
    return TruncatedError(
        f"{coltypes.name(col_type)} value needs {need} bytes at offset {pos}, "
        f"{max(len(buf) - pos, 0)} left",
        preview=buf[pos:pos + 32],
    )


def _bad(col_type: int, what: str, buf: bytes, pos: int, n: int) -> ValueDecodeError:
    return ValueDecodeError(f"{coltypes.name(col_type)}: {what}", preview=buf[pos:pos + n])


def _frac_params(fsp: int) -> tuple[int, int, int, int]:
    """(fraction bytes, fraction bits, exclusive limit of the stored fraction, divisor)."""
    fb = (fsp + 1) // 2
    return fb, fb * 8, 100**fb, 10 if fsp % 2 else 1


# --- DATETIME2 ---------------------------------------------------------------------------

_DT2_PREFIX: dict[int, bytes] = {}


def _dt2_prefix(key: int) -> bytes:
    """b'YYYY-MM-DD HH' for ``key = ymd << 5 | hour`` (DATETIME2 bit layout), cached."""
    ym, day = divmod(key >> 5, 32)
    year, month = divmod(ym, 13)
    text = b"%04d-%02d-%02d %02d" % (year, month, day, key & 31)
    if len(_DT2_PREFIX) >= _CACHE_MAX:
        _DT2_PREFIX.clear()
    _DT2_PREFIX[key] = text
    return text


def _datetime2(fsp: int) -> Decoder:
    fb, fbits, flimit, div = _frac_params(fsp)
    n = 5 + fb
    off = 0x8000000000 << fbits
    fmask = (1 << fbits) - 1
    cache_get = _DT2_PREFIX.get
    T = coltypes.DATETIME2
    hshift = fbits + 12

    if fsp == 0:
        def dec0(buf: bytes, pos: int) -> tuple[bytes, int]:
            end = pos + 5
            if end > len(buf):
                raise _truncated(T, buf, pos, 5)
            v = _from_bytes(buf[pos:end], "big") - off
            if v < 0:
                raise _bad(T, "negative datetime", buf, pos, 5)
            key = v >> 12
            return (cache_get(key) or _dt2_prefix(key)) + _MS_BITS[v & 0xFFF], end

        return dec0

    fmt = b"%b%b.%0" + str(fsp).encode() + b"d"

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + n
        if end > len(buf):
            raise _truncated(T, buf, pos, n)
        v = _from_bytes(buf[pos:end], "big") - off
        f = v & fmask
        if v < 0 or f >= flimit:
            raise _bad(T, "negative datetime or fraction out of range", buf, pos, n)
        key = v >> hshift
        p = cache_get(key) or _dt2_prefix(key)
        return fmt % (p, _MS_BITS[(v >> fbits) & 0xFFF], f // div), end

    return dec


# --- TIMESTAMP / TIMESTAMP2 --------------------------------------------------------------

_TS_PREFIX: dict[int, bytes] = {}


def _ts_prefix(hours: int) -> bytes:
    """b'YYYY-MM-DD HH' (UTC) for a number of hours since the epoch, cached."""
    days, hour = divmod(hours, 24)
    d = _dt.date.fromordinal(_EPOCH_ORDINAL + days)
    text = b"%04d-%02d-%02d %02d" % (d.year, d.month, d.day, hour)
    if len(_TS_PREFIX) >= _CACHE_MAX:
        _TS_PREFIX.clear()
    _TS_PREFIX[hours] = text
    return text


def _timestamp2(fsp: int, col_type: int) -> Decoder:
    fb, fbits, flimit, div = _frac_params(fsp)
    cache_get = _TS_PREFIX.get
    if col_type == coltypes.TIMESTAMP:
        # Old TIMESTAMP: 4 bytes little-endian, no fraction.
        unpack = struct.Struct("<I").unpack_from
        zero0 = b"0000-00-00 00:00:00"

        def dec_old(buf: bytes, pos: int) -> tuple[bytes, int]:
            try:
                (secs,) = unpack(buf, pos)
            except struct.error:
                raise _truncated(col_type, buf, pos, 4) from None
            if not secs:
                return zero0, pos + 4
            h, s = divmod(secs, 3600)
            return (cache_get(h) or _ts_prefix(h)) + _MS_SECS[s], pos + 4

        return dec_old

    n = 4 + fb
    fmask = (1 << fbits) - 1
    zero = b"0000-00-00 00:00:00" + (b"." + b"0" * fsp if fsp else b"")
    fmt = b"%b%b.%0" + str(fsp).encode() + b"d"

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + n
        if end > len(buf):
            raise _truncated(col_type, buf, pos, n)
        v = _from_bytes(buf[pos:end], "big")
        secs = v >> fbits
        if not secs:
            # my_timestamp_from_binary: tv_sec 0 is the zero timestamp whatever the fraction.
            return zero, end
        h, s = divmod(secs, 3600)
        p = cache_get(h) or _ts_prefix(h)
        if not fsp:
            return p + _MS_SECS[s], end
        f = v & fmask
        if f >= flimit:
            raise _bad(col_type, "fraction out of range", buf, pos, n)
        return fmt % (p, _MS_SECS[s], f // div), end

    return dec


# --- TIME2 / TIME ------------------------------------------------------------------------

def _time2(fsp: int) -> Decoder:
    fb, fbits, flimit, div = _frac_params(fsp)
    n = 3 + fb
    off = 0x800000 << fbits
    fmask = (1 << fbits) - 1
    T = coltypes.TIME2
    fmt0 = b"%b%02d%b"
    fmt = b"%b%02d%b.%0" + str(fsp).encode() + b"d"

    def dec(buf: bytes, pos: int) -> tuple[bytes, int]:
        end = pos + n
        if end > len(buf):
            raise _truncated(T, buf, pos, n)
        v = _from_bytes(buf[pos:end], "big") - off
        if v < 0:
            sign = b"-"
            v = -v
        else:
            sign = b""
        hms = v >> fbits
        if not fsp:
            return fmt0 % (sign, (hms >> 12) & 0x3FF, _MS_BITS[hms & 0xFFF]), end
        f = v & fmask
        if f >= flimit:
            raise _bad(T, "fraction out of range", buf, pos, n)
        return fmt % (sign, (hms >> 12) & 0x3FF, _MS_BITS[hms & 0xFFF], f // div), end

    return dec


def _time_old(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Pre-5.6 TIME: 3-byte signed little-endian ``±HHMMSS``."""
    end = pos + 3
    if end > len(buf):
        raise _truncated(coltypes.TIME, buf, pos, 3)
    v = _from_bytes(buf[pos:end], "little", signed=True)
    sign = b""
    if v < 0:
        sign = b"-"
        v = -v
    h, r = divmod(v, 10000)
    m, s = divmod(r, 100)
    return b"%b%02d:%02d:%02d" % (sign, h, m, s), end


# --- DATE / DATETIME (old) ---------------------------------------------------------------

_DATE_CACHE: dict[int, bytes] = {}


def _date_text(v: int) -> bytes:
    text = b"%04d-%02d-%02d" % (v >> 9, (v >> 5) & 15, v & 31)
    if len(_DATE_CACHE) >= _CACHE_MAX:
        _DATE_CACHE.clear()
    _DATE_CACHE[v] = text
    return text


def _date(buf: bytes, pos: int, _get=_DATE_CACHE.get) -> tuple[bytes, int]:
    """DATE: 3 bytes little-endian ``day | month << 5 | year << 9``."""
    end = pos + 3
    if end > len(buf):
        raise _truncated(coltypes.DATE, buf, pos, 3)
    v = _from_bytes(buf[pos:end], "little")
    return _get(v) or _date_text(v), end


_unpack_q = struct.Struct("<Q").unpack_from


def _datetime_old(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Pre-5.6 DATETIME: 8-byte little-endian integer ``YYYYMMDDhhmmss``."""
    try:
        (v,) = _unpack_q(buf, pos)
    except struct.error:
        raise _truncated(coltypes.DATETIME, buf, pos, 8) from None
    d, t = divmod(v, 1000000)
    y, md = divmod(d, 10000)
    mo, day = divmod(md, 100)
    h, r = divmod(t, 10000)
    mi, s = divmod(r, 100)
    return b"%04d-%02d-%02d %02d:%02d:%02d" % (y, mo, day, h, mi, s), pos + 8


# --- YEAR --------------------------------------------------------------------------------

_YEARS = tuple(b"0" if i == 0 else b"%d" % (1900 + i) for i in range(256))


def year_decoder(buf: bytes, pos: int) -> tuple[bytes, int]:
    """YEAR: one byte, 0 is the zero year ``0``, otherwise 1900 + byte."""
    try:
        return _YEARS[buf[pos]], pos + 1
    except IndexError:
        raise _truncated(coltypes.YEAR, buf, pos, 1) from None


# --- dispatch ----------------------------------------------------------------------------

def temporal_decoder(col_type: int, meta: int) -> Decoder:
    """The decoder for a temporal column type (DATE, TIME[2], DATETIME[2], TIMESTAMP[2], YEAR).

    ``meta`` is the fsp (0..6) for the ``*2`` types and ignored otherwise. Raises
    :class:`ValueDecodeError` for an fsp outside 0..6 or a non-temporal type; the decoders
    raise :class:`TruncatedError` when the value runs past ``buf`` and
    :class:`ValueDecodeError` for impossible bytes (negative DATETIME2, fraction >= 10**fsp).
    """
    if col_type in (coltypes.DATETIME2, coltypes.TIMESTAMP2, coltypes.TIME2):
        if not 0 <= meta <= 6:
            raise ValueDecodeError(f"{coltypes.name(col_type)}: fractional precision {meta} > 6")
        if col_type == coltypes.DATETIME2:
            return _datetime2(meta)
        if col_type == coltypes.TIMESTAMP2:
            return _timestamp2(meta, col_type)
        return _time2(meta)
    if col_type == coltypes.TIMESTAMP:
        return _timestamp2(0, col_type)
    if col_type == coltypes.DATE:
        return _date
    if col_type == coltypes.TIME:
        return _time_old
    if col_type == coltypes.DATETIME:
        return _datetime_old
    if col_type == coltypes.YEAR:
        return year_decoder
    raise ValueDecodeError(f"{coltypes.name(col_type)} is not a temporal type")


# --- JSON opaque temporals -----------------------------------------------------------------

def json_temporal_text(field_type: int, packed: int) -> str:
    """Text of a temporal stored in binary JSON as a packed int64 (``TIME_to_longlong_packed``).

    MySQL prints these with ``my_TIME_to_str(..., 6)``: ``YYYY-MM-DD`` for DATE,
    ``[-]HH:MM:SS.ffffff`` for TIME, ``YYYY-MM-DD HH:MM:SS.ffffff`` for DATETIME/TIMESTAMP.
    Raises :class:`ValueDecodeError` for another field type.
    """
    neg = packed < 0
    if neg:
        packed = -packed
    frac = packed & 0xFFFFFF
    whole = packed >> 24
    sign = "-" if neg else ""
    if field_type == coltypes.TIME:
        return "%s%02d:%02d:%02d.%06d" % (
            sign, (whole >> 12) & 0x3FF, (whole >> 6) & 63, whole & 63, frac)
    if field_type in (coltypes.DATE, coltypes.DATETIME, coltypes.TIMESTAMP):
        ymd = whole >> 17
        year, month = divmod(ymd >> 5, 13)
        day = ymd & 31
        date = "%s%04d-%02d-%02d" % (sign, year, month, day)
        if field_type == coltypes.DATE:
            return date
        hms = whole & 0x1FFFF
        return "%s %02d:%02d:%02d.%06d" % (date, hms >> 12, (hms >> 6) & 63, hms & 63, frac)
    raise ValueDecodeError(f"JSON opaque {coltypes.name(field_type)} is not a temporal type")
