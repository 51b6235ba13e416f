"""The compiled row loop of ``rowkernel`` (numba, cached on disk): imported only through
``rowkernel.available()``, which falls back to Python decoding when numba is missing.

Every text form written here is the one ``values.py``, ``temporal.py`` and
``decimal_codec.py`` return (docs/bronze.md); the operation codes are ``rowkernel``'s.
Arithmetic stays in int64 where values fit and in uint64 only for 8-byte unsigned reads:
numba turns mixed int64/uint64 arithmetic into floats.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from pipelines.binlog.fast.opcodes import (DONE as _DONE, GIVE_UP as _GIVE,
                                           NEED_ROOM as _NEED_ROOM, OP_BYTES as _BYTES,
                                           OP_DATE as _DATE, OP_DATETIME2 as _DATETIME2,
                                           OP_DECIMAL as _DECIMAL, OP_FIX_FIXED as _FIX_FIXED,
                                           OP_FIX_PREFIXED as _FIX_PREFIXED,
                                           OP_GIVE_UP as _GIVE_UP, OP_INT as _INT,
                                           OP_NULL_TYPE as _NULL_TYPE, OP_TIME2 as _TIME2,
                                           OP_TIMESTAMP as _TIMESTAMP,
                                           OP_TIMESTAMP2 as _TIMESTAMP2, OP_UINT as _UINT,
                                           OP_UINT_BE as _UINT_BE, OP_YEAR as _YEAR,
                                           ROOM_DATA as _ROOM_DATA, ROOM_FIX as _ROOM_FIX,
                                           ROOM_ROWS as _ROOM_ROWS, ROOM_VALUES as _ROOM_VALUES)
from pipelines.binlog.fast.jit_bytes import memcpy

__all__ = ["decode_rows"]

# The codes of ``opcodes`` (globals: numba compiles them to constants).
_BAD, _ROOM = -1, -2  # an image's outcome when not a position
_TEXT_ROOM = 128  # the longest text of a non-string value (DECIMAL(96,x): 98 bytes)
_DIG2BYTES = np.array([0, 1, 1, 2, 2, 3, 3, 4, 4, 4], np.int64)
_POW10 = np.array([10 ** i for i in range(10)], np.int64)
_U10 = np.uint64(10)

_jit = nb.njit(cache=True, nogil=True)


@_jit
def _put(data, at, v, width):
    """Write int64 ``v`` >= 0 as decimal digits, at least ``width`` (zero-padded)."""
    n = 1
    t = v
    while t >= 10:
        t //= 10
        n += 1
    while width > n:
        data[at] = 48
        at += 1
        width -= 1
    end = at + n
    i = end - 1
    while i >= at:
        data[i] = 48 + v % 10
        v //= 10
        i -= 1
    return end


@_jit
def _put_u64(data, at, v):
    """Write uint64 ``v`` as decimal digits."""
    n = 1
    t = v
    while t >= _U10:
        t //= _U10
        n += 1
    end = at + n
    i = end - 1
    while i >= at:
        data[i] = 48 + np.int64(v % _U10)
        v //= _U10
        i -= 1
    return end


@_jit
def _put_signed(data, at, v):
    if v < 0:
        data[at] = 45
        # -(v + 1) + 1 as uint64 covers the most negative int64
        return _put_u64(data, at + 1, np.uint64(-(v + 1)) + np.uint64(1))
    return _put(data, at, v, 1)


@_jit
def _le(buf, pos, n):
    v = np.uint64(0)
    for i in range(n):
        v |= np.uint64(buf[pos + i]) << np.uint64(8 * i)
    return v


@_jit
def _be(buf, pos, n):
    v = np.uint64(0)
    for i in range(n):
        v = (v << np.uint64(8)) | np.uint64(buf[pos + i])
    return v


@_jit
def _two(data, at, sep, v):
    data[at] = sep
    return _put(data, at + 1, v, 2)


@_jit
def _fraction(data, at, f, fsp):
    """``.`` and the fraction ``f`` (stored hundredths etc.) printed with ``fsp`` digits."""
    if fsp % 2:
        f //= 10
    data[at] = 46
    return _put(data, at + 1, f, fsp)


@_jit
def _civil(days):
    """(year, month, day) of a day number since 1970-01-01 (proleptic Gregorian)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400 + (1 if m <= 2 else 0)
    return y, m, d


@_jit
def _datetime_text(data, at, year, month, day, hour, minute, second):
    """``YYYY-MM-DD HH:MM:SS`` (each field zero-padded to its width, wider when larger)."""
    at = _put(data, at, year, 4)
    at = _two(data, at, 45, month)
    at = _two(data, at, 45, day)
    at = _two(data, at, 32, hour)
    at = _two(data, at, 58, minute)
    return _two(data, at, 58, second)


@_jit
def _epoch_text(data, at, secs):
    """``YYYY-MM-DD HH:MM:SS`` (UTC) of seconds since the epoch."""
    h = secs // 3600
    s = secs % 3600
    y, m, d = _civil(h // 24)
    return _datetime_text(data, at, y, m, d, h % 24, s // 60, s % 60)


@_jit
def _zero_timestamp(data, at, fsp):
    """``0000-00-00 00:00:00`` and, with a fraction, ``.`` and ``fsp`` zeros."""
    at = _datetime_text(data, at, 0, 0, 0, 0, 0, 0)
    if fsp:
        data[at] = 46
        at = _put(data, at + 1, 0, fsp)
    return at


@_jit
def _digit_group(buf, p, digits, mask, first):
    """One big-endian group of ``digits`` decimal digits at ``buf[p:]`` (bytes xor ``mask``;
    the value's first byte without its sign bit): (value, position after it)."""
    nbytes = _DIG2BYTES[digits] if digits < 9 else 4
    v = 0
    for i in range(nbytes):
        b = buf[p + i] ^ mask
        if first and i == 0:
            b &= 0x7F
        v = (v << 8) | b
    return v, p + nbytes


@_jit
def _decimal(buf, pos, precision, scale, data, at):
    """DECIMAL text at ``data[at:]``; returns (new pos, new at), or (-1, 0) for bad digits."""
    intg = precision - scale
    lead = intg % 9
    neg = (buf[pos] & 0x80) == 0
    mask = 0xFF if neg else 0
    start = at
    at += 1  # room for the sign, known once the digits are
    p = pos
    nonzero = False
    printed = False  # an integer digit group is out: the next ones are zero-padded
    nint = intg // 9 + (1 if lead else 0)
    for g in range(nint):
        digits = lead if (g == 0 and lead) else 9
        v, p = _digit_group(buf, p, digits, mask, p == pos)
        if v >= _POW10[digits]:
            return -1, 0
        if printed:
            at = _put(data, at, v, 9)
        elif v:
            at = _put(data, at, v, 1)
            printed = True
        if v:
            nonzero = True
    if not printed:
        data[at] = 48
        at += 1
    if scale:
        data[at] = 46
        at += 1
        tail = scale % 9
        nfrac = scale // 9 + (1 if tail else 0)
        for g in range(nfrac):
            digits = tail if (g == nfrac - 1 and tail) else 9
            v, p = _digit_group(buf, p, digits, mask, p == pos)
            if v >= _POW10[digits]:
                return -1, 0
            at = _put(data, at, v, digits)
            if v:
                nonzero = True
    if neg and nonzero:
        data[start] = 45
    else:  # no sign: move the text one byte left
        for i in range(start + 1, at):
            data[i - 1] = data[i]
        at -= 1
    return p, at


@_jit
def _decimal_size(precision, scale):
    intg = precision - scale
    return ((intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4
            + _DIG2BYTES[scale % 9])


@_jit
def _value(buf, pos, end, op, a, b, data, at):
    """One non-NULL value: (new pos, new at); new pos -1: give up (bad or short bytes)."""
    if op == _INT:
        if pos + a > end:
            return -1, 0
        u = _le(buf, pos, a)
        if a < 8:
            v = np.int64(u)
            if v >= (np.int64(1) << (8 * a - 1)):
                v -= np.int64(1) << (8 * a)
        else:
            v = np.int64(u)  # two's complement of the 8 bytes
        return pos + a, _put_signed(data, at, v)
    if op == _UINT:
        if pos + a > end:
            return -1, 0
        return pos + a, _put_u64(data, at, _le(buf, pos, a))
    if op == _UINT_BE:
        if pos + a > end:
            return -1, 0
        return pos + a, _put_u64(data, at, _be(buf, pos, a))
    if op == _YEAR:
        if pos + 1 > end:
            return -1, 0
        y = np.int64(buf[pos])
        return pos + 1, _put(data, at, (1900 + y) if y else 0, 1)
    if op == _DECIMAL:
        size = _decimal_size(a, b)
        if pos + size > end:
            return -1, 0
        p, new_at = _decimal(buf, pos, a, b, data, at)
        if p < 0:
            return -1, 0
        return p, new_at
    if op == _DATETIME2:
        fb = (a + 1) // 2
        n = 5 + fb
        if pos + n > end:
            return -1, 0
        raw = _be(buf, pos, n)
        off = np.uint64(0x8000000000) << np.uint64(8 * fb)
        if raw < off:
            return -1, 0
        v = np.int64(raw - off)
        f = v & ((np.int64(1) << (8 * fb)) - 1)
        if f >= _POW10[2 * fb]:
            return -1, 0
        ip = v >> (8 * fb)
        key = ip >> 12
        ymd = key >> 5
        ym = ymd >> 5
        at = _datetime_text(data, at, ym // 13, ym % 13, ymd & 31, key & 31, (ip >> 6) & 63,
                            ip & 63)
        if a:
            at = _fraction(data, at, f, a)
        return pos + n, at
    if op == _TIMESTAMP2:
        fb = (a + 1) // 2
        n = 4 + fb
        if pos + n > end:
            return -1, 0
        v = np.int64(_be(buf, pos, n))
        secs = v >> (8 * fb)
        if secs == 0:
            return pos + n, _zero_timestamp(data, at, a)
        f = v & ((np.int64(1) << (8 * fb)) - 1)
        if a and f >= _POW10[2 * fb]:
            return -1, 0
        at = _epoch_text(data, at, secs)
        if a:
            at = _fraction(data, at, f, a)
        return pos + n, at
    if op == _TIMESTAMP:
        if pos + 4 > end:
            return -1, 0
        secs = np.int64(_le(buf, pos, 4))
        if secs == 0:
            return pos + 4, _zero_timestamp(data, at, 0)
        return pos + 4, _epoch_text(data, at, secs)
    if op == _DATE:
        if pos + 3 > end:
            return -1, 0
        v = np.int64(_le(buf, pos, 3))
        at = _put(data, at, v >> 9, 4)
        at = _two(data, at, 45, (v >> 5) & 15)
        return pos + 3, _two(data, at, 45, v & 31)
    if op == _TIME2:
        fb = (a + 1) // 2
        n = 3 + fb
        if pos + n > end:
            return -1, 0
        v = np.int64(_be(buf, pos, n)) - (np.int64(0x800000) << (8 * fb))
        if v < 0:
            data[at] = 45
            at += 1
            v = -v
        hms = v >> (8 * fb)
        f = v & ((np.int64(1) << (8 * fb)) - 1)
        if a and f >= _POW10[2 * fb]:
            return -1, 0
        at = _put(data, at, (hms >> 12) & 0x3FF, 2)
        at = _two(data, at, 58, (hms >> 6) & 63)
        at = _two(data, at, 58, hms & 63)
        if a:
            at = _fraction(data, at, f, a)
        return pos + n, at
    if op == _NULL_TYPE:
        return pos, at
    return -1, 0


@_jit
def _lack(state, what, side, size):
    state[3] = what
    state[4] = side
    state[5] = size


@_jit
def _image(buf, pos, end, prog, data, voff, vvalid, cnt, side, fix, state):
    """One row image into a sink: the new position, or _BAD / _ROOM."""
    ncols = prog.shape[0]
    npres = 0
    for c in range(ncols):
        npres += prog[c, 0]
    nulls_at = pos
    pos += (npres + 7) >> 3
    if pos > end:
        return _BAD
    nv = cnt[0]
    at = cnt[1]
    if nv + ncols > vvalid.shape[0]:
        _lack(state, _ROOM_VALUES, side, nv + ncols)
        return _ROOM
    nfix = state[2]
    k = 0
    for c in range(ncols):
        if prog[c, 0] == 0:
            vvalid[nv] = 0
        elif (buf[nulls_at + (k >> 3)] >> (k & 7)) & 1:
            vvalid[nv] = 0
            k += 1
        else:
            k += 1
            op = prog[c, 1]
            a = prog[c, 2]
            if op == _BYTES or op == _FIX_PREFIXED or op == _FIX_FIXED:
                if pos + a > end:
                    return _BAD
                if op == _FIX_FIXED:
                    s, stop = pos, pos + a
                else:  # a length prefix of ``a`` bytes, then the value
                    s = pos + a
                    stop = s + np.int64(_le(buf, pos, a))
                    if stop > end:
                        return _BAD
                if op == _BYTES:
                    if at + stop - s > data.shape[0]:
                        _lack(state, _ROOM_DATA, side, at + stop - s)
                        return _ROOM
                    memcpy(data, at, buf, s, stop - s)
                    at += stop - s
                else:  # measured only: its Python decoder renders it (a fix-up)
                    if nfix >= fix.shape[0]:
                        _lack(state, _ROOM_FIX, side, nfix + 1)
                        return _ROOM
                    fix[nfix, 0] = side
                    fix[nfix, 1] = nv
                    fix[nfix, 2] = pos
                    fix[nfix, 3] = c
                    nfix += 1
                pos = stop
            elif op == _GIVE_UP:
                return _BAD
            else:
                if at + _TEXT_ROOM > data.shape[0]:
                    _lack(state, _ROOM_DATA, side, at + _TEXT_ROOM)
                    return _ROOM
                pos, at = _value(buf, pos, end, op, a, prog[c, 3], data, at)
                if pos < 0:
                    return _BAD
            vvalid[nv] = 1
        voff[nv + 1] = at
        nv += 1
    cnt[0] = nv
    cnt[1] = at
    state[2] = nfix
    return pos


@_jit
def _no_image(loff, lvalid, cnt):
    r = cnt[2]
    loff[r + 1] = loff[r]
    lvalid[r] = 0
    cnt[2] = r + 1


@_jit
def _close_image(loff, lvalid, cnt):
    r = cnt[2]
    loff[r + 1] = cnt[0]
    lvalid[r] = 1
    cnt[2] = r + 1


@_jit
def decode_rows(buf, pos, end, kind, prog_a, prog_b,
                d1, vo1, vv1, lo1, lv1, c1, d2, vo2, vv2, lo2, lv2, c2, fix, state):
    """Rows of one rows event from ``pos`` to ``end`` into the before (1) and after (2)
    sinks; ``kind`` 0 INSERT (image A is the after image), 1 DELETE (A is the before image),
    2 UPDATE (A before, B after). Returns DONE, NEED_ROOM or GIVE_UP; ``state`` holds the
    position reached (a row start), the rows written and the fix-ups written, and after a
    NEED_ROOM what is lacking, for which sink, and the size needed (``_ROOM_*``)."""
    rows = 0
    while pos < end:
        m1v, m1b, m2v, m2b, mfix = c1[0], c1[1], c2[0], c2[1], state[2]
        if c1[2] + 1 >= lv1.shape[0] or c2[2] + 1 >= lv2.shape[0]:
            side = 0 if c1[2] + 1 >= lv1.shape[0] else 1
            _lack(state, _ROOM_ROWS, side, (c1[2] if side == 0 else c2[2]) + 2)
            state[0] = pos
            state[1] = rows
            return _NEED_ROOM
        if kind == 0:
            p = _image(buf, pos, end, prog_a, d2, vo2, vv2, c2, 1, fix, state)
        elif kind == 1:
            p = _image(buf, pos, end, prog_a, d1, vo1, vv1, c1, 0, fix, state)
        else:
            p = _image(buf, pos, end, prog_a, d1, vo1, vv1, c1, 0, fix, state)
            if p >= 0:
                p = _image(buf, p, end, prog_b, d2, vo2, vv2, c2, 1, fix, state)
        if p <= pos:  # _BAD, _ROOM, or a row of no bytes (the Python decoding judges it)
            c1[0], c1[1], c2[0], c2[1], state[2] = m1v, m1b, m2v, m2b, mfix
            state[0] = pos
            state[1] = rows
            return _NEED_ROOM if p == _ROOM else _GIVE
        if kind == 0:
            _no_image(lo1, lv1, c1)
            _close_image(lo2, lv2, c2)
        elif kind == 1:
            _close_image(lo1, lv1, c1)
            _no_image(lo2, lv2, c2)
        else:
            _close_image(lo1, lv1, c1)
            _close_image(lo2, lv2, c2)
        rows += 1
        pos = p
    state[0] = pos
    state[1] = rows
    return _DONE
