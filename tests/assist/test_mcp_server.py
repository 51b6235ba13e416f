"""Issue 46: ``binlake mcp`` driven by the ``mcp`` client library, over stdio and streamable
HTTP, against a lake indexed from a real MariaDB (tests/support/assist_lake.py): each tool's
result against the server's rows, truncation, bad arguments, no password anywhere.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from tests.support.assist_lake import (ORDERS, AssistLake, build_lake, free_port, start,
                                       wait_http)

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> AssistLake:
    return build_lake(tmp_path_factory.mktemp("mcp46"))


def _env(lk: AssistLake) -> dict[str, str]:
    # the source DSN (root's password inside) is in the configuration the server reads
    return {**os.environ, "BINLAKE_SOURCE_DSN": lk.dsn}


async def _calls(session) -> dict[str, object]:
    """Every tool called once or more; name -> (is_error, structured result or error text)."""
    out = {}
    await session.initialize()
    out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)

    async def call(label, name, args):
        res = await session.call_tool(name, args)
        text = "".join(c.text for c in res.content if getattr(c, "text", None))
        out[label] = (res.isError, text if res.isError else json.loads(text))

    await call("key", "query", {"table": ORDERS, "pk": "7"})
    await call("many", "query", {"table": ORDERS, "limit": 5})
    await call("capped", "query", {"table": ORDERS})
    await call("schema_wide", "query", {"schema": "mcp46", "event_type": "UPDATE"})
    await call("at_moment", "reconstruct", {"table": ORDERS, "at": "MOMENT", "limit": 1000})
    await call("key_at", "reconstruct", {"table": ORDERS, "at": "MOMENT", "pk": "7"})
    await call("flashback", "flashback", {"table": ORDERS, "pk": "7"})
    await call("status", "status", {})
    await call("schema", "schema_changes", {"table": ORDERS})
    await call("quality", "quality", {})
    await call("bad_table", "query", {"table": "mcp46.nope"})
    await call("bad_time", "reconstruct", {"table": ORDERS, "at": "yesterday"})
    await call("two_points", "reconstruct", {"table": ORDERS, "at": "MOMENT", "gtid": "0-1-1"})
    await call("bad_limit", "query", {"table": ORDERS, "limit": -1})
    await call("no_selection", "flashback", {})
    return out


def _fix_moment(lk: AssistLake):
    async def wrapped(session):
        orig = session.call_tool

        async def call_tool(name, args):
            return await orig(name, {k: (lk.moment if v == "MOMENT" else v)
                                     for k, v in args.items()})
        session.call_tool = call_tool
        return await _calls(session)
    return wrapped


def _check(out: dict, lk: AssistLake, max_rows: int) -> None:
    assert out["tools"] == ["flashback", "quality", "query", "reconstruct", "schema_changes",
                            "status"]
    err, key = out["key"]
    assert not err
    types = [c["event_type"] for c in key["changes"]]
    assert types == ["INSERT", "UPDATE", "UPDATE", "UPDATE"]
    last = key["changes"][-1]["row_after"]
    assert (last["id"], last["status"], last["amount"], last["note"]) == lk.key7_final
    assert key["changes"][0]["row_after"] == {"id": 7, "status": "new", "amount": 70}
    assert "status" in key["changes"][1]["changed_columns"]
    assert key["truncated"] is False

    err, many = out["many"]
    assert not err and many["count"] == 5 and many["truncated"] is True and many["note"]
    assert [c["pk_values"] for c in many["changes"]] == ["1", "2", "3", "4", "5"]
    err, capped = out["capped"]
    assert not err and capped["count"] == max_rows and capped["truncated"] is True

    err, wide = out["schema_wide"]
    assert not err and wide["truncated"] is False
    assert sorted((c["pk_values"], c["row_after"].get("status")) for c in wide["changes"]) == [
        ("2", None), ("7", "paid"), ("7", "paid"), ("7", "shipped")]

    err, at = out["at_moment"]
    assert not err
    got = [(r["id"], r["status"], r["amount"]) for r in at["rows"]]
    if at["truncated"]:
        # rows come ordered by their key's values (an INT key: 1, 2, 10, not 1, 10, 2)
        want = sorted(lk.orders_at_moment, key=lambda r: r[0])[:max_rows]
        assert got == want and at["count"] == max_rows
    else:
        assert sorted(got) == lk.orders_at_moment and at["columns"] == ["id", "status",
                                                                        "amount"]
    err, key_at = out["key_at"]
    assert not err and key_at["rows"] == [{"id": 7, "status": "paid", "amount": 70}]

    err, fb = out["flashback"]
    assert not err and fb["applied"] is False and fb["changes"] == 4
    assert "UPDATE `mcp46`.`orders`" in fb["sql"] and "DELETE FROM `mcp46`.`orders`" in fb["sql"]
    assert "'paid'" in fb["sql"] and "START TRANSACTION" in fb["sql"]

    err, st = out["status"]
    assert not err and st["silver"]["rows"] >= 30 + 2 + 1 + 2 + 1 + 1 + 1
    assert all(f["status"] == "completed" for f in st["files"])

    err, sc = out["schema"]
    assert not err
    (t,) = sc["tables"]
    assert t["table"] == ORDERS
    assert [d["kind"] for d in t["ddl"]] == ["DROP", "CREATE", "OTHER"]
    assert "ADD COLUMN note" in t["ddl"][-1]["query"]
    assert t["snapshots"] and t["snapshots"][0]["columns"] == ["id", "status", "amount"]

    err, q = out["quality"]
    assert not err and q["latest"]["status"] in ("passed", "warned") and q["trend"]

    for label, needle in (("bad_table", "mcp46.nope: unknown table"),
                          ("bad_time", "'yesterday'"), ("two_points", "exactly one point"),
                          ("bad_limit", "limit -1"), ("no_selection", "needs a selection")):
        err, text = out[label]
        assert err is True and needle in text, (label, text)


def _no_password(lk: AssistLake, *texts: str) -> None:
    for text in texts:
        assert lk.password not in text
    assert len(lk.password) > 8 and lk.password in lk.dsn  # the check means something


def _files(root: str) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in Path(root).rglob("*")
            if p.is_file()}


def test_mcp_over_stdio(lake: AssistLake, tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    errlog = tmp_path / "stderr.txt"
    params = StdioServerParameters(
        command=sys.executable, env=_env(lake), cwd=str(Path(__file__).resolve().parents[2]),
        args=["-m", "pipelines", "--lake", lake.lake, "mcp", "--max-rows", "20"])

    async def run():
        with open(errlog, "w") as err:
            async with stdio_client(params, errlog=err) as (r, w):
                from mcp import ClientSession

                async with ClientSession(r, w) as session:
                    return await _fix_moment(lake)(session)

    before = _files(lake.lake)
    out = anyio.run(run)
    assert _files(lake.lake) == before  # no tool wrote to the lake (flashback included)
    _check(out, lake, max_rows=20)
    _no_password(lake, json.dumps(out), errlog.read_text())


def test_mcp_over_streamable_http(lake: AssistLake, tmp_path: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    port, log = free_port(), tmp_path / "server.log"
    proc = start(["--lake", lake.lake, "mcp", "--port", str(port), "--max-rows", "10",
                  "--max-bytes", "100000"], _env(lake), log)
    try:
        wait_http(f"http://127.0.0.1:{port}/mcp", proc, log)

        async def run():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (r, w, _):
                async with ClientSession(r, w) as session:
                    return await _fix_moment(lake)(session)

        out = anyio.run(run)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    _check(out, lake, max_rows=10)
    assert f"http://127.0.0.1:{port}/mcp" in log.read_text()
    _no_password(lake, json.dumps(out), log.read_text())


def test_bytes_bound_cuts_rows(lake: AssistLake, spark) -> None:
    from pipelines.assist.mcp_tools import Limits, tool_query, tool_flashback
    from pipelines.config import load_config

    cfg = load_config(env={}, overrides={"lake.root": lake.lake})
    small = Limits(rows=1000, bytes=2000)
    res = tool_query(spark, cfg, table=ORDERS, limits=small)
    assert res["truncated"] is True and 0 < res["count"] < 30 and "bytes" in res["note"]
    assert sum(len(json.dumps(c, ensure_ascii=False).encode()) for c in res["changes"]) <= 2000
    fb = tool_flashback(spark, cfg, table=ORDERS, limits=Limits(rows=10, bytes=600))
    assert fb["truncated"] is True and len(fb["sql"].encode()) <= 600 and fb["applied"] is False


def test_no_lake_is_refused_before_serving(tmp_path: Path, capsys) -> None:
    from pipelines.cli.main import main

    missing = str(tmp_path / "nolake")
    for command in (["mcp"], ["console", "--port", "1"]):
        assert main(["--lake", missing, *command]) == 2
        assert "no such directory" in capsys.readouterr().err
    assert not os.path.exists(missing)
