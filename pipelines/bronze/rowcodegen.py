"""Row images decoded by generated code: one specialised function per table and column set.

The reference row loop (``rows._image``) calls one decoder closure per value. For the common
column types this module instead writes the decoding of a whole image as straight-line Python
(``exec``, once per TABLE_MAP content and columns-present bitmap): values are read into
locals with the offsets and constants baked in, runs of fixed-width little-endian integers with
one precompiled ``struct.Struct``, and the image list is built by one list display. Rare types
(JSON, FLOAT, old temporals, wide decimals, BIT wider than a byte, impossible metadata) call
their ``values.column_decoder`` closure from the generated code.

Correctness rests on one rule: the generated function only ever *returns* what the reference
would return, and gives up on anything unusual. It checks bounds once, at the end of the image
(positions only grow, so any value running past the buffer leaves the final position past
it), checks the same value invariants as the closures (negative DATETIME2, fraction or decimal
group out of range), and on any exception or failed check decodes the image again with the
reference loop from the image start. So errors keep their classes and messages exactly (the
reference raises them), and a value the fast code cannot vouch for is never returned.

Output bytes are those of ``values.py``/``temporal.py``/``decimal_codec.py`` (docs/bronze.md);
``tests/test_rows_fast.py`` compares both paths value by value, type by type.
"""

from __future__ import annotations

import struct
from typing import Callable, Sequence

from pipelines.bronze import coltypes as T
from pipelines.bronze.decimal_codec import DIG2BYTES, decimal_size
from pipelines.bronze.temporal import _DATE_CACHE, _DT2_PREFIX, _MS_BITS, _YEARS
from pipelines.bronze.temporal import _date_text, _dt2_prefix
from pipelines.bronze.values import _S8, _U8

__all__ = ["ImageFn", "image_function", "MAX_COLUMNS"]

ImageFn = Callable[[bytes, int], "tuple[list, int]"]

# Above this many present columns the reference loop is used (compile time, code size).
MAX_COLUMNS = 400

_VARCHAR_LIKE = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING})
_BLOB_LIKE = frozenset({T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB, T.GEOMETRY, T.VECTOR})
# struct field(s) and value expression per little-endian fixed-width integer type; the
# expression names the unpacked fields {0}, {1}.
_TO_TEXT = "_str({0}).encode()"
_INT_FIELDS = {
    (T.SHORT, True): ("h", _TO_TEXT), (T.SHORT, False): ("H", _TO_TEXT),
    (T.LONG, True): ("i", _TO_TEXT), (T.LONG, False): ("I", _TO_TEXT),
    (T.LONGLONG, True): ("q", _TO_TEXT), (T.LONGLONG, False): ("Q", _TO_TEXT),
    (T.INT24, True): ("Hb", "_str({1} << 16 | {0}).encode()"),
    (T.INT24, False): ("HB", "_str({1} << 16 | {0}).encode()"),
    (T.TINY, True): ("B", "_S8[{0}]"), (T.TINY, False): ("B", "_U8[{0}]"),
}
_UINT_FIELD = {1: ("B", "_U8[{0}]"), 2: ("H", _TO_TEXT), 4: ("I", _TO_TEXT), 8: ("Q", _TO_TEXT)}


class _GiveUp(Exception):
    """Raised inside generated code: let the reference loop decode (or reject) the image."""


_BASE_NS = {
    "_str": str, "_fb": int.from_bytes, "_len": len, "_GiveUp": _GiveUp,
    "_U8": _U8, "_S8": _S8, "_YEARS": _YEARS, "_MS": _MS_BITS,
    "_dt2get": _DT2_PREFIX.get, "_dt2p": _dt2_prefix,
    "_dget": _DATE_CACHE.get, "_dtext": _date_text,
}


class _Fixed:
    """A fixed-width little-endian column: struct field chars and a value expression."""

    __slots__ = ("fmt", "expr")

    def __init__(self, fmt: str, expr: str) -> None:
        self.fmt, self.expr = fmt, expr


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
            return _Fixed(*_INT_FIELDS[col_type, not unsigned])
        if col_type == T.YEAR:
            return _Fixed("B", "_YEARS[{0}]")
        if col_type in (T.ENUM, T.SET) and meta in _UINT_FIELD:
            if col_type == T.SET or meta in (1, 2):
                return _Fixed(*_UINT_FIELD[meta])
        if col_type == T.BIT and 1 <= meta <= 8:
            return _Fixed("B", "_U8[{0}]")
        if col_type == T.DOUBLE:
            return _Fixed("d", "_repr({0}).encode()")
        if col_type in _VARCHAR_LIKE and 0 <= meta <= 0xFFFF:
            return self._prefixed(1 if meta < 256 else 2, v)
        if col_type in _BLOB_LIKE and 1 <= meta <= 4:
            return self._prefixed(meta, v)
        if col_type == T.DATETIME2 and 0 <= meta <= 6:
            return self._datetime2(meta, v)
        if col_type == T.DATE:
            return [f"_x = _fb(buf[pos:pos + 3], 'little')",
                    f"{v} = _dget(_x) or _dtext(_x)",
                    "pos += 3"]
        if col_type == T.NEWDECIMAL:
            lines = self._decimal(meta >> 8, meta & 0xFF, v)
            if lines:
                return lines
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

    def _datetime2(self, fsp: int, v: str) -> list[str]:
        fb = (fsp + 1) // 2
        fbits = fb * 8
        n = 5 + fb
        off = 0x8000000000 << fbits
        if fsp == 0:
            return [f"_x = _fb(buf[pos:pos + 5], 'big') - {off}",
                    "if _x < 0: raise _GiveUp",
                    "_k = _x >> 12",
                    f"{v} = (_dt2get(_k) or _dt2p(_k)) + _MS[_x & 4095]",
                    "pos += 5"]
        fmt = self.const(b"%b%b.%0" + str(fsp).encode() + b"d", "fmt")
        frac = "_f" if fsp % 2 == 0 else "_f // 10"
        return [f"_x = _fb(buf[pos:pos + {n}], 'big') - {off}",
                f"_f = _x & {(1 << fbits) - 1}",
                f"if _x < 0 or _f >= {100 ** fb}: raise _GiveUp",
                f"_k = _x >> {fbits + 12}",
                f"{v} = {fmt} % (_dt2get(_k) or _dt2p(_k), _MS[(_x >> {fbits}) & 4095], {frac})",
                f"pos += {n}"]

    def _decimal(self, precision: int, scale: int, v: str) -> list[str] | None:
        """Inline DECIMAL with at most two integer groups and one fraction group, else None."""
        if not (1 <= precision <= 96 and 0 <= scale <= precision):
            return None
        intg = precision - scale
        int_groups = intg // 9 + (1 if intg % 9 else 0)
        if int_groups > 2 or scale > 9:
            return None
        size = decimal_size(precision, scale)
        frac_bits = DIG2BYTES[scale % 9] * 8 if scale < 9 else 32
        bits = size * 8
        top = 1 << (bits - 1)
        flip = ((1 << bits) - 1) ^ top
        pos_fmt = b"%d.%0" + str(scale).encode() + b"d" if scale else b"%d"
        pf = self.const(pos_fmt, "fmt")
        nf = self.const(b"-" + pos_fmt, "fmt")
        args = "(_i, _g)" if scale else "_i"
        checks = [f"_g >= {10 ** scale}"] if scale else []
        lines = [f"_x = _fb(buf[pos:pos + {size}], 'big')",
                 f"if _x & {top}:",
                 f"    _x ^= {top}",
                 f"    _m = {pf}",
                 "else:",
                 f"    _x ^= {flip}",
                 f"    _m = {nf} if _x else {pf}",
                 f"_i = _x >> {frac_bits}"]
        if scale:
            lines.append(f"_g = _x & {(1 << frac_bits) - 1}")
        if int_groups == 2:
            lead = intg - 9
            lines += ["_h = _i >> 32", "_i &= 4294967295"]
            checks = [f"_h >= {10 ** lead}", "_i >= 1000000000"] + checks
        else:
            checks = [f"_i >= {10 ** intg}"] + checks
        lines.append(f"if {' or '.join(checks)}: raise _GiveUp")
        if int_groups == 2:
            lines.append("_i += _h * 1000000000")
        lines += [f"{v} = _m % {args}", f"pos += {size}"]
        return lines

    # --- runs of fixed-width columns -----------------------------------------------------

    def fixed_run(self, run: list[tuple[str, _Fixed]]) -> list[str]:
        """Read a run of fixed-width columns with one struct; set each column's local."""
        if len(run) == 1 and run[0][1].fmt == "B":
            v, fx = run[0]
            return [f"{v} = {fx.expr.format('buf[pos]')}", "pos += 1"]
        fmt = "<" + "".join(fx.fmt for _, fx in run)
        st = struct.Struct(fmt)
        unpack = self.const(st.unpack_from, "st")
        names: list[str] = []
        out: list[str] = []
        for v, fx in run:
            fields = [f"_a{len(names) + i}" for i in range(len(fx.fmt))]
            names += fields
            out.append(f"{v} = {fx.expr.format(*fields)}")
        lhs = names[0] + "," if len(names) == 1 else ", ".join(names)
        return [f"{lhs} = {unpack}(buf, pos)", f"pos += {st.size}"] + out


def _indent(lines: list[str], n: int) -> list[str]:
    pad = " " * n
    return [pad + line for line in lines]


def image_function(types: Sequence[int], metas: Sequence[int],
                   unsigned: Sequence[bool | None] | None, decoders: Sequence[Callable],
                   cols: Sequence[int], ncols: int, reference: ImageFn) -> ImageFn | None:
    """A function ``image(buf, pos) -> (values, new_pos)`` for one row image.

    ``cols`` are the present columns (indexes into the per-column sequences, in order);
    ``reference(buf, pos)`` is the reference decoding of the same image, called whenever
    the generated code meets anything it does not handle (and so raising its errors).
    Returns ``None`` when there are more than :data:`MAX_COLUMNS` present columns.
    """
    if len(cols) > MAX_COLUMNS:
        return None
    g = _Gen()
    g.ns["_repr"] = repr
    g.ns["_ref"] = reference
    nbytes = (len(cols) + 7) >> 3
    # Segments: a run of fixed-width columns (one struct) or one other column.
    segments: list[tuple[int, list]] = []  # (null-bit mask, [(local, _Fixed)] or code lines)
    per_col: dict[int, tuple[str, object]] = {}
    run: list[tuple[str, _Fixed]] = []
    run_mask = 0
    for k, idx in enumerate(cols):
        v = f"v{idx}"
        how = g.column(types[idx], metas[idx], unsigned[idx] if unsigned else None,
                       decoders[idx], v)
        per_col[k] = (v, how)
        if isinstance(how, _Fixed):
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

    locals_ = [per_col[k][0] for k in range(len(cols))]
    row = ["None"] * ncols
    for k, idx in enumerate(cols):
        row[idx] = locals_[k]
    if nbytes == 0:
        read_nulls = ["nulls = 0"]
    elif nbytes == 1:
        read_nulls = ["nulls = buf[pos]", "pos += 1"]
    else:
        read_nulls = [f"nulls = _fb(buf[pos:pos + {nbytes}], 'little')", f"pos += {nbytes}"]
    body = ["def image(buf, pos):", "    p0 = pos", "    try:"]
    body += _indent(read_nulls, 8)
    body.append("        if not nulls:")
    body += _indent(present_code or ["pass"], 12)
    body.append("        else:")
    if locals_:
        body.append("            " + " = ".join(locals_) + " = None")
    body += _indent(nulls_code or ["pass"], 12)
    # Falling back outside the except clause keeps the reference's errors free of context.
    body += ["    except Exception:",
             "        pos = 1 << 62",
             "    if pos > _len(buf):",
             "        return _ref(buf, p0)",
             f"    return [{', '.join(row)}], pos"]
    source = "\n".join(body) + "\n"
    exec(compile(source, "<binlake row image>", "exec"), g.ns)
    fn = g.ns["image"]
    fn.source = source  # for debugging and tests
    return fn
