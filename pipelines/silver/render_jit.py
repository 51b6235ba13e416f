"""The compiled loops of ``render_fast`` (numba, cached on disk): one table's row images →
silver's JSON texts in one pass per image side, and the columns an UPDATE changed.

Every text is the one ``render.make_renderer`` writes (``docs/types.md``): numbers and JSON
text as they are, temporal and DECIMAL text in quotes, UTF-8 text as ``json.dumps(s,
ensure_ascii=False)`` does it (``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``, ``\\b``,
``\\f``, other control characters ``\\u00xx``). Text that is not valid UTF-8 (or, for
utf8mb3, holds a character outside the BMP) makes the loop stop and say so: the caller then
renders the group the Arrow way, which names the bad value.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from pipelines.binlog.fast.jit_bytes import memcpy
from pipelines.silver.render_kinds import (KIND_JSON as _JSON, KIND_NUM as _NUM,
                                           KIND_PRE as _PRE, KIND_QUOTED as _QUOTED,
                                           KIND_UTF8 as _UTF8, KIND_UTF8_BMP as _UTF8_BMP,
                                           OUT_ROOM as _ROOM,
                                           OUT_OK as _OK, OUT_INVALID as _INVALID)

__all__ = ["render_side", "changed_columns", "gather"]

_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)
# Per byte: 0 (as it is), the letter after a backslash, or u (\u00xx), as json.dumps writes it.
_ESC = np.zeros(256, np.uint8)
_ESC[:32] = ord("u")
for _c, _letter in ((34, '"'), (92, "\\"), (10, "n"), (13, "r"), (9, "t"), (8, "b"), (12, "f")):
    _ESC[_c] = ord(_letter)

# Well-formed UTF-8 (the Unicode Standard, table 3-7), per lead byte: the sequence's length
# (0: not a lead byte) and the range its second byte must lie in (no overlong forms, no
# surrogates, nothing past U+10FFFF); every later byte is 0x80-0xBF.
_SEQ_LEN = np.zeros(256, np.int64)
_SECOND_LO = np.full(256, 0x80, np.uint8)
_SECOND_HI = np.full(256, 0xBF, np.uint8)
_SEQ_LEN[0xC2:0xE0] = 2
_SEQ_LEN[0xE0:0xF0] = 3
_SEQ_LEN[0xF0:0xF5] = 4
_SECOND_LO[0xE0], _SECOND_HI[0xED] = 0xA0, 0x9F
_SECOND_LO[0xF0], _SECOND_HI[0xF4] = 0x90, 0x8F

_jit = nb.njit(cache=True, nogil=True)


@_jit
def _put(out, at, src, s, e):
    """``src[s:e]`` written at ``out[at:]`` (the caller made room); returns the new end."""
    memcpy(out, at, src, s, e - s)
    return at + e - s


@_jit
def _seq_len(d, i, e, bmp_only):
    """The length of the UTF-8 sequence at d[i] (a byte >= 0x80), or 0 if it is not valid
    (with ``bmp_only``: also a 4-byte one)."""
    c = d[i]
    k = _SEQ_LEN[c]
    if k == 0 or i + k > e or (bmp_only and k == 4):
        return 0
    c1 = d[i + 1]
    if c1 < _SECOND_LO[c] or c1 > _SECOND_HI[c]:
        return 0
    for j in range(i + 2, i + k):
        if (d[j] & 0xC0) != 0x80:
            return 0
    return k


@_jit
def _utf8_ok(d, s, e, bmp_only):
    """Whether d[s:e] is valid UTF-8 (and, with ``bmp_only``, has no 4-byte character)."""
    i = s
    while i < e:
        if d[i] < 0x80:
            i += 1
        else:
            k = _seq_len(d, i, e, bmp_only)
            if k == 0:
                return False
            i += k
    return True


@_jit
def _escaped_text(d, s, e, out, at, bmp_only):
    """UTF-8 text d[s:e] as a JSON string (quotes included) at out[at:]; returns the new end,
    or -1 when the text is not valid UTF-8 (with ``bmp_only``: or has a 4-byte character)."""
    out[at] = 34
    at += 1
    run = s  # the plain bytes from ``run`` on are copied at once, at the next escape or end
    i = s
    while i < e:
        c = d[i]
        if c >= 0x80:
            k = _seq_len(d, i, e, bmp_only)
            if k == 0:
                return -1
            i += k
            continue
        esc = _ESC[c]
        if esc == 0:
            i += 1
            continue
        at = _put(out, at, d, run, i)
        if esc != 117:  # \" \\ \n \r \t \b \f
            out[at] = 92
            out[at + 1] = esc
            at += 2
        else:  # another control character: \u00xx
            out[at] = 92
            out[at + 1] = 117
            out[at + 2] = 48
            out[at + 3] = 48
            out[at + 4] = _HEX[c >> 4]
            out[at + 5] = _HEX[c & 15]
            at += 6
        i += 1
        run = i
    at = _put(out, at, d, run, e)
    out[at] = 34
    return at + 1


@_jit
def render_side(rows, loff, lvalid, voff, vdata, vvalid, kinds, pre, pre_off, pre_data,
                pre_valid, noff, ndata, out, ooff, ovalid, span_s, span_e, state):
    """One image side of ``m`` rows, the images at positions ``rows`` of the ``list<binary>``
    array ``loff``… (every column present) → JSON objects (``out``/``ooff``/``ovalid``) and
    per (row, column) the value's text span in ``out`` (start -1: no image). ``pre[i]`` ≥ 0:
    column ``i``'s texts come rendered (``pre_*``, row-major by pre column). Returns _OK,
    _ROOM (``out`` too small; ``state[0]`` the bytes needed so far) or _INVALID (``state[1]``
    the row)."""
    m = rows.shape[0]
    n = kinds.shape[0]
    at = 0
    cap = out.shape[0]
    for r in range(m):
        ooff[r] = at
        q = rows[r]
        if not lvalid[q]:
            ovalid[r] = 0
            for i in range(n):
                span_s[r, i] = -1
            continue
        ovalid[r] = 1
        base = loff[q]
        if at + 2 > cap:
            state[0] = at
            return _ROOM
        out[at] = 123  # {
        at += 1
        first = True
        for i in range(n):
            v = base + i
            ns, ne = noff[i], noff[i + 1]
            kind = kinds[i]
            if vvalid[v]:
                s, e = voff[v], voff[v + 1]
                need = (e - s) * 6 + 2 if (kind == _UTF8 or kind == _UTF8_BMP) else e - s + 2
                if kind == _PRE:
                    j = pre[i] * m + r
                    need = pre_off[j + 1] - pre_off[j]
            else:
                need = 4
            if at + (ne - ns) + need + 4 > cap:
                state[0] = at + (ne - ns) + need + 4
                return _ROOM
            if not first:
                out[at] = 44  # ,
                out[at + 1] = 32
                at += 2
            first = False
            at = _put(out, at, ndata, ns, ne)
            span_s[r, i] = at
            if not vvalid[v]:
                at = _put(out, at, _NULL, 0, 4)
            elif kind == _NUM:
                at = _put(out, at, vdata, s, e)
            elif kind == _QUOTED:
                out[at] = 34
                at = _put(out, at + 1, vdata, s, e)
                out[at] = 34
                at += 1
            elif kind == _JSON:
                if not _utf8_ok(vdata, s, e, False):
                    state[1] = r
                    return _INVALID
                at = _put(out, at, vdata, s, e)
            elif kind == _PRE:
                j = pre[i] * m + r
                if not pre_valid[j]:
                    at = _put(out, at, _NULL, 0, 4)
                else:
                    at = _put(out, at, pre_data, pre_off[j], pre_off[j + 1])
            else:
                at = _escaped_text(vdata, s, e, out, at, kind == _UTF8_BMP)
                if at < 0:  # not valid UTF-8
                    state[1] = r
                    return _INVALID
            span_e[r, i] = at
        out[at] = 125  # }
        at += 1
    ooff[m] = at
    state[0] = at
    return _OK


@_jit
def changed_columns(both, b_out, b_s, b_e, a_out, a_s, a_e, noff, ndata, out, ooff, ovalid):
    """Per row: ``["a", "b"]`` of the columns whose texts differ where ``both`` (an UPDATE
    with both images; null otherwise); a column absent from either image is not compared.
    ``ndata[noff[i]:noff[i + 1]]`` is column i's name as JSON text."""
    m = both.shape[0]
    n = b_s.shape[1]
    at = 0
    for r in range(m):
        ooff[r] = at
        if not both[r]:
            ovalid[r] = 0
            continue
        ovalid[r] = 1
        out[at] = 91  # [
        at += 1
        first = True
        for i in range(n):
            bs, as_ = b_s[r, i], a_s[r, i]
            if bs < 0 or as_ < 0:
                continue
            be, ae = b_e[r, i], a_e[r, i]
            same = be - bs == ae - as_
            if same:
                for k in range(be - bs):
                    if b_out[bs + k] != a_out[as_ + k]:
                        same = False
                        break
            if same:
                continue
            if not first:
                out[at] = 44
                out[at + 1] = 32
                at += 2
            first = False
            ns, ne = noff[i], noff[i + 1]
            at = _put(out, at, ndata, ns, ne)
        out[at] = 93  # ]
        at += 1
    ooff[m] = at
    return at


@_jit
def gather(pick, a, a_s, a_e, b, b_s, b_e, out, ooff, ovalid):
    """Per row the span ``a[a_s[r]:a_e[r]]`` where ``pick[r]`` is 0, else ``b[b_s[r]:b_e[r]]``
    (a start < 0: null), as one string array's buffers."""
    at = 0
    for r in range(pick.shape[0]):
        ooff[r] = at
        src, s, e = (a, a_s[r], a_e[r]) if pick[r] == 0 else (b, b_s[r], b_e[r])
        if s < 0:
            ovalid[r] = 0
            continue
        ovalid[r] = 1
        at = _put(out, at, src, s, e)
    ooff[pick.shape[0]] = at
    return at
