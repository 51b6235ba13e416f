"""Regenerate the collation id → character set table in ``pipelines/silver/collations.py``.

Binlogs name a string column's character set only by a collation id (TABLE_MAP optional
metadata ``DEFAULT_CHARSET`` / ``COLUMN_CHARSET``). The table is read from a real MariaDB
server's ``information_schema.COLLATION_CHARACTER_SET_APPLICABILITY`` (every id, including
MariaDB 10.10+'s ``uca1400`` ids ≥ 2048, which ``COLLATIONS`` leaves NULL) and merged with
MySQL 8.0's ids that MariaDB does not define (``MYSQL_80`` below: 76 and the
``utf8mb4_*_0900_*`` range 255–323, from MySQL 8.0's ``SHOW COLLATION``; the same list ships as
``MYSQL_CHARACTER_SETS_80`` in mysql-connector-python's ``charsets.py``). An id both servers
define must name the same character set, or the script stops.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/make_collations.py            # a throwaway MariaDB
    PYTHONPATH=. .venv/bin/python scripts/make_collations.py --dsn mysql://root:pw@127.0.0.1:3306/
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "pipelines" / "silver" / "collations.py"
BEGIN = "# --- BEGIN GENERATED: scripts/make_collations.py ---"
END = "# --- END GENERATED ---"

# MySQL 8.0 ids MariaDB lacks or could lack: (id, character set, collation).
MYSQL_80: list[tuple[int, str, str]] = [
    (76, "utf8mb3", "utf8mb3_tolower_ci"),
    (248, "gb18030", "gb18030_chinese_ci"),
    (249, "gb18030", "gb18030_bin"),
    (250, "gb18030", "gb18030_unicode_520_ci"),
    (255, "utf8mb4", "utf8mb4_0900_ai_ci"),
    (256, "utf8mb4", "utf8mb4_de_pb_0900_ai_ci"),
    (257, "utf8mb4", "utf8mb4_is_0900_ai_ci"),
    (258, "utf8mb4", "utf8mb4_lv_0900_ai_ci"),
    (259, "utf8mb4", "utf8mb4_ro_0900_ai_ci"),
    (260, "utf8mb4", "utf8mb4_sl_0900_ai_ci"),
    (261, "utf8mb4", "utf8mb4_pl_0900_ai_ci"),
    (262, "utf8mb4", "utf8mb4_et_0900_ai_ci"),
    (263, "utf8mb4", "utf8mb4_es_0900_ai_ci"),
    (264, "utf8mb4", "utf8mb4_sv_0900_ai_ci"),
    (265, "utf8mb4", "utf8mb4_tr_0900_ai_ci"),
    (266, "utf8mb4", "utf8mb4_cs_0900_ai_ci"),
    (267, "utf8mb4", "utf8mb4_da_0900_ai_ci"),
    (268, "utf8mb4", "utf8mb4_lt_0900_ai_ci"),
    (269, "utf8mb4", "utf8mb4_sk_0900_ai_ci"),
    (270, "utf8mb4", "utf8mb4_es_trad_0900_ai_ci"),
    (271, "utf8mb4", "utf8mb4_la_0900_ai_ci"),
    (273, "utf8mb4", "utf8mb4_eo_0900_ai_ci"),
    (274, "utf8mb4", "utf8mb4_hu_0900_ai_ci"),
    (275, "utf8mb4", "utf8mb4_hr_0900_ai_ci"),
    (277, "utf8mb4", "utf8mb4_vi_0900_ai_ci"),
    (278, "utf8mb4", "utf8mb4_0900_as_cs"),
    (279, "utf8mb4", "utf8mb4_de_pb_0900_as_cs"),
    (280, "utf8mb4", "utf8mb4_is_0900_as_cs"),
    (281, "utf8mb4", "utf8mb4_lv_0900_as_cs"),
    (282, "utf8mb4", "utf8mb4_ro_0900_as_cs"),
    (283, "utf8mb4", "utf8mb4_sl_0900_as_cs"),
    (284, "utf8mb4", "utf8mb4_pl_0900_as_cs"),
    (285, "utf8mb4", "utf8mb4_et_0900_as_cs"),
    (286, "utf8mb4", "utf8mb4_es_0900_as_cs"),
    (287, "utf8mb4", "utf8mb4_sv_0900_as_cs"),
    (288, "utf8mb4", "utf8mb4_tr_0900_as_cs"),
    (289, "utf8mb4", "utf8mb4_cs_0900_as_cs"),
    (290, "utf8mb4", "utf8mb4_da_0900_as_cs"),
    (291, "utf8mb4", "utf8mb4_lt_0900_as_cs"),
    (292, "utf8mb4", "utf8mb4_sk_0900_as_cs"),
    (293, "utf8mb4", "utf8mb4_es_trad_0900_as_cs"),
    (294, "utf8mb4", "utf8mb4_la_0900_as_cs"),
    (296, "utf8mb4", "utf8mb4_eo_0900_as_cs"),
    (297, "utf8mb4", "utf8mb4_hu_0900_as_cs"),
    (298, "utf8mb4", "utf8mb4_hr_0900_as_cs"),
    (300, "utf8mb4", "utf8mb4_vi_0900_as_cs"),
    (303, "utf8mb4", "utf8mb4_ja_0900_as_cs"),
    (304, "utf8mb4", "utf8mb4_ja_0900_as_cs_ks"),
    (305, "utf8mb4", "utf8mb4_0900_as_ci"),
    (306, "utf8mb4", "utf8mb4_ru_0900_ai_ci"),
    (307, "utf8mb4", "utf8mb4_ru_0900_as_cs"),
    (308, "utf8mb4", "utf8mb4_zh_0900_as_cs"),
    (309, "utf8mb4", "utf8mb4_0900_bin"),
    (310, "utf8mb4", "utf8mb4_nb_0900_ai_ci"),
    (311, "utf8mb4", "utf8mb4_nb_0900_as_cs"),
    (312, "utf8mb4", "utf8mb4_nn_0900_ai_ci"),
    (313, "utf8mb4", "utf8mb4_nn_0900_as_cs"),
    (314, "utf8mb4", "utf8mb4_sr_latn_0900_ai_ci"),
    (315, "utf8mb4", "utf8mb4_sr_latn_0900_as_cs"),
    (316, "utf8mb4", "utf8mb4_bs_0900_ai_ci"),
    (317, "utf8mb4", "utf8mb4_bs_0900_as_cs"),
    (318, "utf8mb4", "utf8mb4_bg_0900_ai_ci"),
    (319, "utf8mb4", "utf8mb4_bg_0900_as_cs"),
    (320, "utf8mb4", "utf8mb4_gl_0900_ai_ci"),
    (321, "utf8mb4", "utf8mb4_gl_0900_as_cs"),
    (322, "utf8mb4", "utf8mb4_mn_cyrl_0900_ai_ci"),
    (323, "utf8mb4", "utf8mb4_mn_cyrl_0900_as_cs"),
]


def _read_server(conn) -> tuple[str, dict[int, tuple[str, str]]]:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
        cur.execute("SHOW COLUMNS FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
        cols = {str(r[0]).upper() for r in cur.fetchall()}
        if {"ID", "FULL_COLLATION_NAME"} <= cols:  # MariaDB 10.10+
            cur.execute("SELECT ID, CHARACTER_SET_NAME, FULL_COLLATION_NAME "
                        "FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
        else:
            cur.execute("SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME "
                        "FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        rows = cur.fetchall()
    out: dict[int, tuple[str, str]] = {}
    for cid, charset, name in rows:
        cid, charset = int(cid), "utf8mb3" if charset == "utf8" else str(charset)
        if cid in out and out[cid][0] != charset:
            raise SystemExit(f"server lists id {cid} for {out[cid]} and {charset}")
        out[cid] = (charset, str(name))
    return version, out


def merge(server: dict[int, tuple[str, str]]) -> dict[int, tuple[str, str]]:
    merged = dict(server)
    for cid, charset, name in MYSQL_80:
        if cid in merged:
            if merged[cid][0] != charset:
                raise SystemExit(f"id {cid}: server says {merged[cid][0]}, MySQL 8.0 says {charset}")
            continue
        merged[cid] = (charset, name)
    return dict(sorted(merged.items()))


def render(version: str, table: dict[int, tuple[str, str]]) -> str:
    lines = [BEGIN,
             f"# From {version} information_schema.COLLATION_CHARACTER_SET_APPLICABILITY",
             "# plus MySQL 8.0 ids it lacks (scripts/make_collations.py MYSQL_80). Do not edit.",
             "COLLATIONS: dict[int, tuple[str, str]] = {"]
    lines += [f"    {cid}: ({cs!r}, {name!r})," for cid, (cs, name) in table.items()]
    lines += ["}", END]
    return "\n".join(lines)


def write(block: str, target: Path = TARGET) -> None:
    text = target.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{target}: generated-block markers not found")
    target.write_text(pattern.sub(lambda _m: block, text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", help="read this server instead of starting a throwaway MariaDB")
    args = ap.parse_args(argv)
    if args.dsn:
        from pipelines.mysql.client import connect
        from pipelines.mysql.dsn import Dsn

        conn = connect(Dsn.parse(args.dsn, setting="--dsn"))
        try:
            version, server = _read_server(conn)
        finally:
            conn.close()
    else:
        from devtools.mariadb import MariaDBServer

        with MariaDBServer() as srv:
            conn = srv.connect()
            try:
                version, server = _read_server(conn)
            finally:
                conn.close()
    table = merge(server)
    write(render(version, table))
    print(f"{TARGET}: {len(table)} collation ids ({len(server)} from {version})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
