"""Typed config: precedence defaults < file < env < flags, and errors naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.config import load_config
from pipelines.mysql.dsn import Dsn
from pipelines.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]

def test_precedence(tmp_path: Path) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text('[lake]\nroot = "/from/file"\n[bronze]\nbatch_rows = 7\n')
    assert load_config(str(conf), env={}).lake.root == "/from/file"
    env = {"BINLAKE_LAKE_ROOT": "/from/env", "BINLAKE_BRONZE_BATCH_ROWS": "9"}
    cfg = load_config(str(conf), env=env)
    assert (cfg.lake.root, cfg.bronze.batch_rows) == ("/from/env", 9)
    assert load_config(str(conf), env=env, overrides={"lake.root": "/flag"}).lake.root == "/flag"
    assert load_config(None, env={"BINLAKE_LAKE": "/short"}).lake.root == "/short"
    assert load_config(None, env={"BINLAKE_SPARK_REMOTE": "sc://h:1"}).engine.remote == "sc://h:1"


@pytest.mark.parametrize("text, env, needle", [
    ("[lake]\nroot = 3\n", {}, "lake.root"),
    ("[bronze]\nbatch_rows = \"many\"\n", {}, "bronze.batch_rows"),
    ("[nope]\nx = 1\n", {}, "[nope]"),
    ("[lake]\nroots = 'x'\n", {}, "lake.roots"),
    ("not toml [", {}, "invalid TOML"),
    ("", {"BINLAKE_ENGINE_KIND": "flink"}, "engine.kind"),
    ("", {"BINLAKE_SPARK_REMOTE": "http://x"}, "engine.remote"),
    ("", {"BINLAKE_ENGINE_KIND": "connect"}, "engine.remote"),
    ("", {"BINLAKE_BRONZE_CHECKSUM": "maybe"}, "bronze.checksum"),
    ("[silver]\ncommit_mb = -1\n", {}, "silver.commit_mb"),
    ("", {"BINLAKE_BRONZE_COMMIT_MB": "lots"}, "bronze.commit_mb"),
    ("", {"BINLAKE_SOURCE_DSN": "postgres://u@h/db"}, "source.dsn"),
])
def test_bad_settings_are_named(tmp_path: Path, text: str, env: dict, needle: str) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(str(conf), env=env)
    assert needle in str(info.value)


def test_missing_conf_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nowhere.toml"):
        load_config(str(tmp_path / "nowhere.toml"), env={})


def test_dsn_parses_and_never_shows_the_password() -> None:
    dsn = Dsn.parse("mysql://app:s%40cret@db.example:3307/shop")
    assert (dsn.user, dsn.password, dsn.host, dsn.port, dsn.database) == (
        "app", "s@cret", "db.example", 3307, "shop")
    assert "s@cret" not in str(dsn) and "s@cret" not in repr(dsn)
    assert Dsn.parse("mysql://root@127.0.0.1/").database is None


@pytest.mark.parametrize("text, env, bronze, silver", [
    ("", {}, None, None),  # unset: decided by the engine (delta_ops.commit_bytes)
    ("[bronze]\ncommit_mb = 16\n[silver]\ncommit_mb = 0\n", {}, 16.0, 0.0),
    ("[bronze]\ncommit_mb = \"auto\"\n", {"BINLAKE_SILVER_COMMIT_MB": "0.5"}, None, 0.5),
    ("[bronze]\ncommit_mb = 64\n", {"BINLAKE_BRONZE_COMMIT_MB": "auto"}, None, None),
])
def test_commit_mb_is_a_number_or_left_to_the_engine(tmp_path: Path, text: str, env: dict,
                                                     bronze, silver) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text(text)
    cfg = load_config(str(conf), env=env)
    assert (cfg.bronze.commit_mb, cfg.silver.commit_mb) == (bronze, silver)


def test_the_shipped_conf_leaves_commits_to_the_engine() -> None:
    cfg = load_config(str(REPO / "conf" / "binlake.toml"), env={})
    assert (cfg.bronze.commit_mb, cfg.silver.commit_mb) == (None, None)
