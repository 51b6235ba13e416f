"""Pure: the value an ``ALTER TABLE … ADD COLUMN`` gives the rows that exist, in silver's form.

The server fills the new column of every existing row with the column's default (its
``DEFAULT`` literal; without one, NULL for a nullable column and the type's zero for a
``NOT NULL`` one) and logs no row. :func:`existing_rows_value` says what that value is as
silver writes it (the decoder's text: ``binlog/values``, ``temporal``, ``decimal_codec``), so
silver can derive the rows' change (``derive.added_columns``); or, where it cannot know it
(:class:`Underived`: an expression, ``CURRENT_TIMESTAMP``, a ``TIMESTAMP`` (the session's
time zone), floating point, bit and binary types, generated and ``AUTO_INCREMENT`` columns,
more fractional digits than the column keeps), why — and the table is flagged instead.

Text forms, as the decoder writes them and the server's ``CAST(c AS CHAR)`` prints them:
integers and ``YEAR`` as numbers (the zero year ``0``); ``DECIMAL(p,s)`` with exactly ``s``
digits after the point (rounded half away from zero, as the server stores it); ``DATE``
``YYYY-MM-DD``; ``DATETIME(f)`` and ``TIME(f)`` with exactly ``f`` fractional digits; the text
types as the literal (``CHAR`` without its trailing spaces); ``ENUM`` as its label.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from pipelines.silver.ddl import parenthesised

__all__ = ["Underived", "existing_rows_value"]

_INTS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bool", "boolean"}
_TEXTS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_DECIMALS = {"decimal", "numeric", "dec", "fixed"}
_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'", re.S)
_DEFAULT = re.compile(r"\bDEFAULT\b\s*", re.I)
_LIT = r"(-?\d+(?:\.\d*)?(?:e[-+]?\d+)?|'(?:[^'\\]|\\.|'')*'|NULL|TRUE|FALSE)"
_LITERAL = re.compile(rf"(?:\(\s*{_LIT}\s*\)|{_LIT})(?=\s|,|$)", re.I | re.S)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DATETIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$")
_TIME = re.compile(r"^(-?)(\d{1,3}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$")


@dataclass(frozen=True)
class Underived:
    """Why the existing rows' value of an added column is not derived."""

    reason: str


def _masked(text: str) -> str:
    """``text`` with its quoted strings blanked (same length): keywords inside them vanish."""
    return _QUOTED.sub(lambda m: "'" + " " * (len(m.group(0)) - 2) + "'", text)


def _unquoted(lit: str) -> str:
    return re.sub(r"\\(.)", r"\1", lit[1:-1].replace("''", "'"))


def existing_rows_value(kind: str, rest: str) -> str | None | Underived:
    """The JSON text silver holds for the existing rows' value of a column added as ``kind``
    (the type's first word) followed by ``rest`` (its arguments and attributes); None when
    it is NULL (the rows' images do not change)."""
    kind = kind.lower()
    inside, attrs = parenthesised(rest)
    args = inside or ""
    masked = _masked(attrs)
    if re.search(r"\b(?:GENERATED|AS\s*\(|AUTO_INCREMENT)\b", masked, re.I):
        return Underived("a generated or AUTO_INCREMENT column: the server computes each "
                         "row's value")
    d = _DEFAULT.search(masked)
    not_null = re.search(r"\bNOT\s+NULL\b", masked, re.I) is not None
    if d is not None:
        lit = _LITERAL.match(attrs, d.end())
        if lit is None:
            word = (attrs[d.end():].split() or [""])[0]
            return Underived(f"DEFAULT {word}: an expression")
        literal = lit.group(1) or lit.group(2)
        if literal.upper() == "NULL":
            return None
    elif not_null:
        literal = None  # the type's zero
    else:
        return None
    if kind == "timestamp":
        return Underived("a TIMESTAMP default (the session's time zone places it)")
    return _typed(kind, args, literal)


def _typed(kind: str, args: str, literal: str | None) -> str | Underived:
    if kind in _INTS or kind == "year":
        if literal is None:
            return "0"
        text = _unquoted(literal) if literal.startswith("'") else literal
        if literal.upper() in ("TRUE", "FALSE"):
            return "1" if literal.upper() == "TRUE" else "0"
        if not re.fullmatch(r"-?\d+", text):
            return Underived(f"DEFAULT {literal} of an integer column")
        n = int(text)
        if kind == "year" and not (n == 0 or 1901 <= n <= 2155):
            return Underived(f"DEFAULT {literal} of a YEAR column")
        return str(n)
    if kind in _TEXTS:
        text = "" if literal is None else (
            _unquoted(literal) if literal.startswith("'") else literal)
        if kind == "char":
            text = text.rstrip(" ")
        return json.dumps(text, ensure_ascii=False)
    if kind in _DECIMALS:
        parts = [p.strip() for p in args.split(",")] if args.strip() else []
        try:
            scale = int(parts[1]) if len(parts) > 1 else 0
            number = Decimal(0) if literal is None else Decimal(
                _unquoted(literal) if literal.startswith("'") else literal)
            text = format(number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP),
                          "f")
        except (InvalidOperation, ValueError):
            return Underived(f"DEFAULT {literal} of a DECIMAL column")
        return json.dumps(text.lstrip("-") if Decimal(text) == 0 else text)
    if kind in ("date", "datetime", "time"):
        return _temporal(kind, args, literal)
    if kind == "enum":
        labels = [_unquoted(x.group(0)) for x in _QUOTED.finditer(args)]
        if not labels:
            return Underived("ENUM labels not understood")
        if literal is None:
            return json.dumps(labels[0], ensure_ascii=False)
        want = _unquoted(literal) if literal.startswith("'") else literal
        found = [x for x in labels if x.lower() == want.lower()]
        if len(found) != 1:
            return Underived(f"DEFAULT {literal} of an ENUM column")
        return json.dumps(found[0], ensure_ascii=False)
    return Underived(f"a {kind.upper()} column's default")


def _temporal(kind: str, args: str, literal: str | None) -> str | Underived:
    fsp = int(args) if args.strip().isdigit() else 0
    frac_zero = "." + "0" * fsp if fsp else ""
    if literal is None:
        zero = {"date": "0000-00-00", "datetime": "0000-00-00 00:00:00" + frac_zero,
                "time": "00:00:00" + frac_zero}[kind]
        return json.dumps(zero)
    if not literal.startswith("'"):
        return Underived(f"DEFAULT {literal} of a {kind.upper()} column")
    text = _unquoted(literal)
    if kind == "date":
        return json.dumps(text) if _DATE.match(text) else Underived(
            f"DEFAULT {literal} of a DATE column")
    if kind == "datetime" and _DATE.match(text):
        text += " 00:00:00"  # a date alone: its midnight
    m = (_DATETIME if kind == "datetime" else _TIME).match(text)
    if m is None:
        return Underived(f"DEFAULT {literal} of a {kind.upper()} column")
    frac = m.group(5) or ""
    if len(frac) > fsp:  # MySQL rounds, MariaDB truncates: the server decides
        return Underived(f"DEFAULT {literal}: more fractional digits than {kind.upper()}({fsp})")
    tail = ("." + frac.ljust(fsp, "0")) if fsp else ""
    if kind == "datetime":
        return json.dumps(f"{m.group(1)} {m.group(2)}:{m.group(3)}:{m.group(4)}{tail}")
    return json.dumps(f"{m.group(1)}{int(m.group(2)):02d}:{m.group(3)}:{m.group(4)}{tail}")
