"""Row images decoded by generated code: one specialised loop per table and column set.

The reference row loop (``rows._image``) calls one ``values.column_decoder`` closure per
value. For the common column types this module instead writes the decoding of every row of a
rows event as straight-line Python (``exec``; ``rows.py`` builds it once per TABLE_MAP content,
rows kind and columns-present bitmaps): values are read into locals with offsets and constants
baked in, each run of fixed-width columns of one byte order with one precompiled
``struct.Struct`` (integers little-endian; DECIMAL digit groups, DATETIME2, TIMESTAMP2 and BIT
big-endian), a NULL bitmap of zero skips every NULL test, and each image is built by one list
display. Other types (JSON, FLOAT, TIME2, old temporals, wide decimals, impossible metadata)
call their closure from the generated code.

Correctness rests on one rule: generated code only ever *returns* what the reference would
return, and gives up on anything unusual. It checks bounds once per row (positions only grow,
so a value running past the buffer leaves the row's end past it), checks the same value
invariants as the closures (negative DATETIME2, fraction or decimal group out of range), and
on any exception or failed check stops at the start of that row (image), which the reference
then decodes: errors keep their classes and messages exactly, because the reference raises
them, and a value the fast code cannot vouch for is never returned.

Output bytes are those of ``values.py``/``temporal.py``/``decimal_codec.py`` (docs/bronze.md);
``tests/binlog/test_rows_fast.py`` compares both paths type by type, on mutated and truncated rows,
and over the whole corpus.
"""

from __future__ import annotations

import struct
from typing import Callable, Sequence

from pipelines.binlog import coltypes as T
from pipelines.binlog.decimal_codec import DIG2BYTES
from pipelines.binlog.temporal import (
    _DATE_CACHE,
    _DT2_PREFIX,
    _MS_BITS,
    _MS_SECS,
    _TS_PREFIX,
    _YEARS,
    _date_text,
    _dt2_prefix,
    _ts_prefix,
)
from pipelines.binlog.values import _S8, _U8
from pipelines.vocabulary import INSERT, UPDATE

__all__ = ["MAX_COLUMNS", "ImageFn", "RowsFn", "image_function", "rows_function"]

ImageFn = Callable[[bytes, int], "tuple[list, int]"]

# Above this many present columns the reference loop is used (compile time, code size).
MAX_COLUMNS = 400

# Little-endian integer columns: struct field(s) and the statement setting the value ({v});
# {0}, {1} name the unpacked fields.
# Text of 0..9999 (counters, quantities, flags, small ids): a lookup instead of str().encode().
_SMALL = tuple(b"%d" % i for i in range(10000))
_TO_TEXT = "{v} = _str({0}).encode()"
_U_TEXT = "{v} = _SMALL[{0}] if {0} < 10000 else _str({0}).encode()"
_S_TEXT = "{v} = _SMALL[{0}] if 0 <= {0} < 10000 else _str({0}).encode()"
_INT24 = "{v} = _str({1} << 16 | {0}).encode()"
_INT_FIELDS = {
    (T.SHORT, True): ("h", _S_TEXT), (T.SHORT, False): ("H", _U_TEXT),
    (T.LONG, True): ("i", _S_TEXT), (T.LONG, False): ("I", _U_TEXT),
    (T.LONGLONG, True): ("q", _S_TEXT), (T.LONGLONG, False): ("Q", _U_TEXT),
    (T.INT24, True): ("Hb", _INT24), (T.INT24, False): ("HB", _INT24),
    (T.TINY, True): ("B", "{v} = _S8[{0}]"), (T.TINY, False): ("B", "{v} = _U8[{0}]"),
}
_UINT_FIELD = {1: ("B", "{v} = _U8[{0}]"), 2: ("H", _TO_TEXT), 4: ("I", _TO_TEXT),
               8: ("Q", _TO_TEXT)}
# A big-endian unsigned integer of 1..8 bytes as struct fields and the expression joining them.
_BE_FIELDS = {
    1: ("B", "{0}"), 2: ("H", "{0}"), 3: ("HB", "({0} << 8 | {1})"), 4: ("I", "{0}"),
    5: ("IB", "({0} << 8 | {1})"), 6: ("IH", "({0} << 16 | {1})"),
    7: ("IHB", "({0} << 24 | {1} << 8 | {2})"), 8: ("Q", "{0}"),
}


class _GiveUp(Exception):
    """Raised inside generated code: let the reference loop decode (or reject) the image."""


_BASE_NS = {
    "_str": str, "_repr": repr, "_fb": int.from_bytes, "_len": len, "_GiveUp": _GiveUp,
    "_U8": _U8, "_S8": _S8, "_SMALL": _SMALL, "_YEARS": _YEARS, "_MS": _MS_BITS, "_MSS": _MS_SECS,
    "_dt2get": _DT2_PREFIX.get, "_dt2p": _dt2_prefix, "_tsget": _TS_PREFIX.get,
    "_tsp": _ts_prefix, "_dget": _DATE_CACHE.get, "_dtext": _date_text,
}


class _Fixed:
    """A fixed-width column read by struct: byte order, field chars, statement templates.

    Templates use ``{v}`` for the value's local and ``{0}``, ``{1}``… for its fields.
    """

    __slots__ = ("fmt", "lines", "order")

    def __init__(self, order: str, fmt: str, lines: str | list[str]) -> None:
        self.order, self.fmt = order, fmt
        self.lines = [lines] if isinstance(lines, str) else lines


def _big_endian(widths: list[int]) -> tuple[str, list[str]]:
    """Struct chars for consecutive big-endian unsigned fields of these byte widths, and one
    expression template per width over the fields numbered in order."""
    fmt, exprs, k = "", [], 0
    for w in widths:
        chars, expr = _BE_FIELDS[w]
        exprs.append(expr.format(*(f"{{{k + i}}}" for i in range(len(chars)))))
        fmt += chars
        k += len(chars)
    return fmt, exprs


class _Gen:
    def __init__(self) -> None:
        self.ns: dict = dict(_BASE_NS)
        self._names: dict[object, str] = {}

    def const(self, value: object, stem: str) -> str:
        """A namespace name bound to ``value`` (hashable values are shared)."""
        key = (stem, value) if isinstance(value, (int, bytes, str)) else (stem, id(value))
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"_{stem}{len(self._names)}"
            self.ns[name] = value
        return name

    # --- one column ------------------------------------------------------------------

    def column(self, col_type: int, meta: int, unsigned: bool | None, dec: Callable,
               v: str) -> _Fixed | list[str]:
        """How to decode one non-NULL value into local ``v``: a :class:`_Fixed` or code lines."""
        if col_type in T.INTEGER_TYPES:
            return _Fixed("<", *_INT_FIELDS[col_type, not unsigned])
        if col_type == T.YEAR:
            return _Fixed("<", "B", "{v} = _YEARS[{0}]")
        if (col_type == T.SET and meta in _UINT_FIELD) or (col_type == T.ENUM and meta in (1, 2)):
            return _Fixed("<", *_UINT_FIELD[meta])
        if col_type == T.BIT and 1 <= meta <= 64:
            fmt, (expr,) = _big_endian([(meta + 7) // 8])
            return _Fixed(">", fmt, f"{{v}} = _str({expr}).encode()")
        if col_type == T.DOUBLE:
            return _Fixed("<", "d", "{v} = _repr({0}).encode()")
        if col_type in T.VARCHAR_LIKE and 0 <= meta <= 0xFFFF:
            return self._prefixed(1 if meta < 256 else 2, v)
        if col_type in T.BLOB_LIKE and 1 <= meta <= 4:
            return self._prefixed(meta, v)
        if col_type == T.DATETIME2 and 0 <= meta <= 6:
            return self._datetime2(meta)
        if col_type == T.TIMESTAMP2 and 0 <= meta <= 6:
            return self._timestamp2(meta)
        if col_type == T.DATE:
            return ["_x = _fb(buf[pos:pos + 3], 'little')",
                    f"{v} = _dget(_x) or _dtext(_x)",
                    "pos += 3"]
        if col_type == T.NEWDECIMAL:
            fixed = self._decimal(meta >> 8, meta & 0xFF)
            if fixed is not None:
                return fixed
        if col_type == T.NULL:
            return [f"{v} = b''"]
        return [f"{v}, pos = {self.const(dec, 'dec')}(buf, pos)"]

    def _prefixed(self, width: int, v: str) -> list[str]:
        if width == 1:
            length = "buf[pos]"
        elif width == 2:
            length = "(buf[pos] | buf[pos + 1] << 8)"
        else:
            length = f"_fb(buf[pos:pos + {width}], 'little')"
        # A short prefix or value leaves _e (hence pos) past the buffer: caught at the end.
        return [f"_e = pos + {width} + {length}",
                f"{v} = buf[pos + {width}:_e]",
                "pos = _e"]

    def _datetime2(self, fsp: int) -> _Fixed:
        # temporal._datetime2 on 32-bit pieces: {0} = the first 4 bytes (0x80000000 + ymd,
        # hour and the top 4 bits of the minute), the 5th byte (rest of minute, second) is
        # {1} or the top byte of {1}, then the fraction.
        fb = (fsp + 1) // 2
        fmt, b5, frac = {0: ("IB", "{1}", ""), 1: ("IBB", "{1}", "{2}"),
                         2: ("IBH", "{1}", "{2}"), 3: ("II", "({1} >> 24)", "({1} & 16777215)")}[fb]
        lines = ["if {0} < 2147483648: raise _GiveUp",  # below the offset: negative
                 "_k = ({0} - 2147483648) >> 4",  # ymd << 5 | hour
                 "_p = _dt2get(_k) or _dt2p(_k)",
                 f"_s = _MS[({{0}} & 15) << 8 | {b5}]"]
        if fsp == 0:
            return _Fixed(">", fmt, lines + ["{v} = _p + _s"])
        text = self.const(b"%b%b.%0" + str(fsp).encode() + b"d", "fmt")
        lines += [f"_f = {frac}",
                  f"if _f >= {100 ** fb}: raise _GiveUp",
                  f"{{v}} = {text} % (_p, _s, {'_f' if fsp % 2 == 0 else '_f // 10'})"]
        return _Fixed(">", fmt, lines)

    def _timestamp2(self, fsp: int) -> _Fixed:
        # Same checks and pieces as temporal._timestamp2 (zero seconds: zero text, any fraction).
        fb = (fsp + 1) // 2
        zero = self.const(b"0000-00-00 00:00:00" + (b"." + b"0" * fsp if fsp else b""), "zero")
        widths = [4, fb] if fb else [4]
        fmt, exprs = _big_endian(widths)
        lines = [f"if not {exprs[0]}: {{v}} = {zero}",
                 "else:",
                 f"    _h = {exprs[0]} // 3600",
                 "    _p = _tsget(_h) or _tsp(_h)",
                 f"    _r = {exprs[0]} - _h * 3600"]
        if not fsp:
            return _Fixed(">", fmt, lines + ["    {v} = _p + _MSS[_r]"])
        text = self.const(b"%b%b.%0" + str(fsp).encode() + b"d", "fmt")
        frac = exprs[1] if fsp % 2 == 0 else f"{exprs[1]} // 10"
        return _Fixed(">", fmt, lines + [
            f"    if {exprs[1]} >= {100 ** fb}: raise _GiveUp",
            f"    {{v}} = {text} % (_p, _MSS[_r], {frac})"])

    def _decimal(self, precision: int, scale: int) -> _Fixed | None:
        """DECIMAL with at most two integer groups and one fraction group, read group by group
        (decimal_codec's dec_small/dec_two); ``None`` for other shapes (the closure is used)."""
        if not (1 <= precision <= 96 and 0 <= scale <= precision):
            return None
        intg = precision - scale
        if intg > 18 or scale > 9:
            return None
        # (bytes, digits) per group, most significant first: integer groups, then fraction.
        groups = []
        if intg % 9:
            groups.append((DIG2BYTES[intg % 9], intg % 9))
        groups += [(4, 9)] * (intg // 9)
        n_int = len(groups)
        if scale:
            groups.append((4 if scale == 9 else DIG2BYTES[scale], scale))
        fmt, exprs = _big_endian([b for b, _ in groups])
        pos_fmt = b"%d.%0" + str(scale).encode() + b"d" if scale else b"%d"
        pf = self.const(pos_fmt, "fmt")
        nf = self.const(b"-" + pos_fmt, "fmt")
        names = [f"_d{k}" for k in range(len(groups))]
        top = 1 << (groups[0][0] * 8 - 1)
        # Non-negative: the first group has its top bit set. Negative: every bit inverted.
        lines = [f"if {exprs[0]} & {top}:"]
        lines += [f"    {n} = {e}" + (f" ^ {top}" if k == 0 else "")
                  for k, (n, e) in enumerate(zip(names, exprs))]
        lines.append(f"    _m = {pf}")
        lines.append("else:")
        for k, (n, e) in enumerate(zip(names, exprs)):
            mask = (1 << groups[k][0] * 8) - 1
            lines.append(f"    {n} = {e} ^ {mask ^ top if k == 0 else mask}")
        lines.append(f"    _m = {nf} if {' or '.join(names)} else {pf}")
        checks = [f"{n} >= {10 ** d}" for n, (_, d) in zip(names, groups)]
        lines.append(f"if {' or '.join(checks)}: raise _GiveUp")
        ip = names[:n_int]
        ip_expr = "0" if not ip else ip[0] if len(ip) == 1 else f"{ip[0]} * 1000000000 + {ip[1]}"
        lines.append(f"{{v}} = _m % ({ip_expr}, {names[-1]})" if scale else f"{{v}} = _m % ({ip_expr})")
        return _Fixed(">", fmt, lines)

    # --- runs of fixed-width columns -----------------------------------------------------

    def fixed_run(self, run: list[tuple[str, _Fixed]]) -> list[str]:
        """Read a run of fixed-width columns (one byte order) with one struct."""
        if len(run) == 1 and run[0][1].fmt == "B":
            v, fx = run[0]
            return [line.format("buf[pos]", v=v) for line in fx.lines] + ["pos += 1"]
        st = struct.Struct(run[0][1].order + "".join(fx.fmt for _, fx in run))
        unpack = self.const(st.unpack_from, "st")
        names: list[str] = []
        out: list[str] = []
        for v, fx in run:
            fields = [f"_a{len(names) + i}" for i in range(len(fx.fmt))]
            names += fields
            out += [line.format(*fields, v=v) for line in fx.lines]
        lhs = names[0] + "," if len(names) == 1 else ", ".join(names)
        return [f"{lhs} = {unpack}(buf, pos)", f"pos += {st.size}"] + out


def _indent(lines: list[str], n: int) -> list[str]:
    pad = " " * n
    return [pad + line for line in lines]


def _image_code(g: _Gen, types: Sequence[int], metas: Sequence[int],
                unsigned: Sequence[bool | None] | None, decoders: Sequence[Callable],
                cols: Sequence[int], ncols: int, out: str) -> list[str]:
    """Statements decoding one image at ``pos`` (NULL bitmap first) into list ``out``.

    They advance ``pos``, may raise anything on bad bytes and may leave ``pos`` past the
    buffer: the caller checks.
    """
    nbytes = (len(cols) + 7) >> 3
    # Segments: a run of fixed-width columns (one struct) or one other column.
    segments: list[tuple[int, list]] = []  # (null-bit mask, [(local, _Fixed)] or code lines)
    run: list[tuple[str, _Fixed]] = []
    run_mask = 0
    for k, idx in enumerate(cols):
        v = f"v{idx}"
        how = g.column(types[idx], metas[idx], unsigned[idx] if unsigned else None,
                       decoders[idx], v)
        if isinstance(how, _Fixed):
            if run and run[0][1].order != how.order:
                segments.append((run_mask, run))
                run, run_mask = [], 0
            run.append((v, how))
            run_mask |= 1 << k
            continue
        if run:
            segments.append((run_mask, run))
            run, run_mask = [], 0
        segments.append((1 << k, how))
    if run:
        segments.append((run_mask, run))

    present_code: list[str] = []
    nulls_code: list[str] = []
    for mask, seg in segments:
        if seg and isinstance(seg[0], tuple):
            code = g.fixed_run(seg)
            present_code += code
            nulls_code.append(f"if not nulls & {mask}:")
            nulls_code += _indent(code, 4)
            if len(seg) > 1:
                nulls_code.append("else:")
                bit = mask & -mask
                for v, fx in seg:
                    nulls_code.append(f"    if not nulls & {bit}:")
                    nulls_code += _indent(g.fixed_run([(v, fx)]), 8)
                    bit <<= 1
        else:
            present_code += seg
            nulls_code.append(f"if not nulls & {mask}:")
            nulls_code += _indent(seg, 4)

    locals_ = [f"v{idx}" for idx in cols]
    row = ["None"] * ncols
    for idx in cols:
        row[idx] = f"v{idx}"
    if nbytes == 0:
        code = ["nulls = 0"]
    elif nbytes == 1:
        code = ["nulls = buf[pos]", "pos += 1"]
    elif nbytes == 2:
        code = ["nulls = buf[pos] | buf[pos + 1] << 8", "pos += 2"]
    else:
        code = [f"nulls = _fb(buf[pos:pos + {nbytes}], 'little')", f"pos += {nbytes}"]
    code.append("if not nulls:")
    code += _indent(present_code or ["pass"], 4)
    code.append("else:")
    if locals_:
        code.append("    " + " = ".join(locals_) + " = None")
    code += _indent(nulls_code or ["pass"], 4)
    code.append(f"{out} = [{', '.join(row)}]")
    return code


_CODE: dict[tuple[str, str], object] = {}  # compiled sources (the same tables, file after file)
_CODE_MAX = 256


def _compile(g: _Gen, lines: list[str], label: str) -> Callable:
    source = "\n".join(lines) + "\n"
    key = (source, label)
    code = _CODE.get(key)
    if code is None:
        if len(_CODE) >= _CODE_MAX:
            _CODE.clear()
        code = _CODE[key] = compile(source, f"<binlake {label}>", "exec")
    exec(code, g.ns)  # noqa: S102 - our own generated source, see the module docstring
    fn = g.ns["generated"]
    fn.source = source  # for debugging and tests
    return fn


def image_function(types: Sequence[int], metas: Sequence[int],
                   unsigned: Sequence[bool | None] | None, decoders: Sequence[Callable],
                   cols: Sequence[int], ncols: int, reference: ImageFn,
                   label: str = "row image") -> ImageFn | None:
    """A function ``image(buf, pos) -> (values, new_pos)`` for one row image.

    ``types``/``metas``/``unsigned``/``decoders`` describe the table's columns (as in
    ``TableMap``), ``cols`` the present ones (indexes, in order); ``reference(buf, pos)`` is
    the reference decoding of the same image, called whenever the generated code meets
    anything it does not handle (and so raising its errors). ``label`` names the code in
    tracebacks. Returns ``None`` when there are more than :data:`MAX_COLUMNS` present
    columns.
    """
    if len(cols) > MAX_COLUMNS:
        return None
    g = _Gen()
    g.ns["_ref"] = reference
    lines = ["def generated(buf, pos):", "    p0 = pos", "    try:"]
    lines += _indent(_image_code(g, types, metas, unsigned, decoders, cols, ncols, "row"), 8)
    # Falling back outside the except clause keeps the reference's errors free of context.
    lines += ["    except Exception:",
              "        pos = 1 << 62",
              "    if pos > _len(buf):",
              "        return _ref(buf, p0)",
              "    return row, pos"]
    return _compile(g, lines, label)


RowsFn = Callable[[bytes, int, int, Callable], int]


def rows_function(types: Sequence[int], metas: Sequence[int],
                  unsigned: Sequence[bool | None] | None, decoders: Sequence[Callable],
                  ncols: int, kind: str, cols_a: Sequence[int],
                  cols_b: Sequence[int] | None = None, label: str = "rows") -> RowsFn | None:
    """A loop ``rows(buf, pos, end, append) -> stop`` over the row images of a rows event.

    ``kind`` is INSERT (one image per row, after), DELETE (one, before) or UPDATE (before
    image over ``cols_a``, after image over ``cols_b``). From ``pos`` while below ``end``
    (``len(buf)``), each row is decoded and passed to ``append`` as a (before, after) pair;
    the loop returns the position where it stopped: ``end``, or the start of the first row
    it could not vouch for (a value it does not handle, bad bytes, a row past ``end``),
    from which the caller continues with the reference decoding. Returns ``None`` when an
    image has more than :data:`MAX_COLUMNS` present columns.
    """
    if len(cols_a) > MAX_COLUMNS or (cols_b is not None and len(cols_b) > MAX_COLUMNS):
        return None
    g = _Gen()
    loop = _image_code(g, types, metas, unsigned, decoders, cols_a, ncols, "_ra")
    if kind == UPDATE:
        assert cols_b is not None
        loop += _image_code(g, types, metas, unsigned, decoders, cols_b, ncols, "_rb")
        pair = "(_ra, _rb)"
    else:
        pair = "(None, _ra)" if kind == INSERT else "(_ra, None)"
    loop += ["if pos > end:", "    break", f"append({pair})"]
    lines = ["def generated(buf, pos, end, append):",
             "    p0 = pos",
             "    try:",
             "        while pos < end:",
             "            p0 = pos"]
    lines += _indent(loop, 12)
    lines += ["    except Exception:",
              "        return p0",
              "    return p0 if pos > end else pos"]
    return _compile(g, lines, label)
