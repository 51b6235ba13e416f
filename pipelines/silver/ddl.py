"""Pure: which tables a DDL statement changes (so silver knows where schema epochs begin).

Conservative on purpose: any CREATE/ALTER/DROP/RENAME TABLE (and DROP DATABASE) touching a
table starts a new epoch for it, even when the change kept the columns (ALTER … ADD INDEX):
a spurious epoch can only cost a quarantine, never a misnamed row.
"""

from __future__ import annotations

import re
from typing import Iterator

__all__ = ["tables_touched", "DROP_DATABASE", "clauses", "outside_quotes", "parenthesised"]

DROP_DATABASE = "*"  # table name meaning "every table of the schema"

_COMMENTS = re.compile(r"/\*(?!!).*?\*/|--[^\n]*\n|#[^\n]*\n", re.S)
_VERSIONED = re.compile(r"/\*!\d*\s*(.*?)\*/", re.S)
_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?"
_CREATE = re.compile(
    rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_QUALIFIED}",
    re.I)
# ALTER TABLE up to the table's name (``renames`` reads on past it)
_ALTER_TABLE = (rf"^ALTER\s+(?:ONLINE\s+|OFFLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?"
                rf"{_QUALIFIED}")
_ALTER = re.compile(_ALTER_TABLE, re.I)
_DROP = re.compile(r"^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?(.*)$", re.I | re.S)
_RENAME = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.I | re.S)
_DROP_DB = re.compile(rf"^DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?({_IDENT})", re.I)
_ITEM = re.compile(_QUALIFIED)


def _unquote(ident: str) -> str:
    if ident.startswith("`"):
        return ident[1:-1].replace("``", "`")
    return ident


def _qualify(first: str, second: str | None, default_schema: str | None) -> tuple[str, str]:
    if not second:
        return default_schema or "", _unquote(first)
    return _unquote(first), _unquote(second)


def _clean(query: str) -> str:
    q = _VERSIONED.sub(r"\1", query)
    q = _COMMENTS.sub(" ", q + "\n")
    return q.strip()


def tables_touched(query: str, default_schema: str | None) -> list[tuple[str, str]]:
    """(schema, table) pairs whose columns the statement may change; ``[]`` for other SQL.

    ``DROP DATABASE db`` gives ``[(db, "*")]``. RENAME gives both the old and the new names.
    """
    q = _clean(query)
    m = _CREATE.match(q) or _ALTER.match(q)
    if m:
        return [_qualify(m.group(1), m.group(2), default_schema)]
    m = _DROP.match(q)
    if m:
        body = re.split(r"\s+(?:RESTRICT|CASCADE)\s*$", m.group(1).strip(), flags=re.I)[0]
        return [_qualify(a, b, default_schema) for a, b in _ITEM.findall(body)]
    m = _RENAME.match(q)
    if m:
        return [_qualify(a, b, default_schema) for a, b in _ITEM.findall(m.group(1))
                if a.upper() != "TO"]
    m = _DROP_DB.match(q)
    if m:
        return [(_unquote(m.group(1)), DROP_DATABASE)]
    return []


def outside_quotes(text: str) -> Iterator[tuple[int, str, int]]:
    """(index, character, parenthesis depth before it) of ``text``'s characters outside
    quotes (``'…'``, ``"…"``, `` `…` ``, the quote characters included). In a string a
    backslash escapes the next character (``'it\\'s'``, MySQL's default; under
    ``NO_BACKSLASH_ESCAPES`` a string ending in a backslash is read as going on)."""
    depth, quote, escaped = 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote != "`":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
            continue
        yield i, ch, depth
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1


def clauses(body: str) -> list[str]:
    """``body`` split at its top-level commas (not inside parentheses or quotes)."""
    out, start = [], 0
    for i, ch, depth in outside_quotes(body):
        if ch == "," and depth == 0:
            out.append(body[start:i].strip())
            start = i + 1
    out.append(body[start:].strip())
    return [c for c in out if c]


def parenthesised(text: str) -> tuple[str | None, str]:
    """(the inside of the parenthesis ``text`` opens, what follows it); (None, ``text``)
    when it opens none (leading blanks aside) or never closes it."""
    text = text.lstrip()
    if not text.startswith("("):
        return None, text
    for i, ch, depth in outside_quotes(text):
        if ch == ")" and depth == 1:
            return text[1:i], text[i + 1:]
    return None, text
