"""dbtrail's ``query_text`` / ``query_hash`` for gold: the statement as gold stores it, and its
``STATEMENT_DIGEST`` asked of the gold server.

dbtrail (``internal/indexer``, docs/gold.md) stores a statement as valid UTF-8 cut to 16 KiB
at a character boundary, with the marker :data:`TRUNCATION_MARKER` appended when cut, and
sets ``query_hash`` to ``STATEMENT_DIGEST(query_text)`` computed on the index connection at
write time. A cut statement gets no hash (it would not parse); a statement the server cannot
digest gets NULL; a server without the function (MariaDB: error 1305) gets NULL for all,
asked once per connection. The digest is an enrichment: it never fails an export.

Silver keeps the full text; only gold applies the cap, as dbtrail's readers expect.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["MAX_QUERY_TEXT_BYTES", "TRUNCATION_MARKER", "gold_query_text", "StatementDigests"]

MAX_QUERY_TEXT_BYTES = 16 * 1024
TRUNCATION_MARKER = " /* bintrail:truncated */"
_PER_SELECT = 200
_NO_FUNCTION = 1305  # ER_SP_DOES_NOT_EXIST: FUNCTION STATEMENT_DIGEST does not exist


def gold_query_text(text: str | None) -> str | None:
    """``text`` as gold stores it: unchanged up to 16 KiB of UTF-8, else cut at a character
    boundary and marked."""
    if text is None:
        return None
    raw = text.encode("utf-8", "replace")
    if len(raw) <= MAX_QUERY_TEXT_BYTES:
        return text
    return raw[:MAX_QUERY_TEXT_BYTES].decode("utf-8", "ignore") + TRUNCATION_MARKER


class StatementDigests:
    """``STATEMENT_DIGEST`` of statement texts on one connection: one SELECT per
    :data:`_PER_SELECT` distinct texts (one per text after that SELECT fails, so one bad
    statement nulls only its own hash)."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.available = True

    def lookup(self, texts: Iterable[str | None]) -> dict[str, str | None]:
        """The digest of each distinct text (None where there is none)."""
        out: dict[str, str | None] = {}
        todo = []
        for t in {t for t in texts if t is not None}:
            if not self.available or t.endswith(TRUNCATION_MARKER):
                out[t] = None
            else:
                todo.append(t)
        for i in range(0, len(todo), _PER_SELECT):
            part = todo[i:i + _PER_SELECT]
            got = self._select(part)
            if got is None:
                got = [self._select([t]) or [None] for t in part] if self.available else []
                got = [g[0] for g in got]
            out.update(zip(part, got or [None] * len(part)))
        return out

    def _select(self, texts: list[str]) -> list[str | None] | None:
        import pymysql

        if not self.available:
            return None
        try:
            with self.conn.cursor() as cur:
                cur.execute("SELECT " + ", ".join(["STATEMENT_DIGEST(%s)"] * len(texts)), texts)
                row = cur.fetchone()
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] == _NO_FUNCTION:
                self.available = False
            return None
        return [None if v is None else str(v) for v in row]
