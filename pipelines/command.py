"""What every binlake command shares: the global options, the configuration they give, and
one way to run a command and turn its outcome into the process's exit code.

A command module (``bronze/command.py``, ``gold/command.py``, ...) has one function,
``add_parser(sub)``: it adds its sub-command(s) to ``sub`` (argparse's sub-parsers), each
with its ``handler`` (:data:`Handler`) as a default. ``binlake`` (``pipelines.cli.main``)
calls every module's and takes the global options before the sub-command. Each stage's job
entry point (``python -m pipelines.bronze``, the ``binlake-bronze`` console script,
Databricks wheel tasks, spark-submit) builds one flat parser from the same ``add_parser``
(:func:`stage_parser`), so the global options may come anywhere there. Both run the
command's handler through :func:`run`.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import sys
from typing import Callable, Sequence

from pipelines.config import Config, load_config
from pipelines.errors import EXIT_BUSY, EXIT_CONFIG, BinlakeError, ConfigError, LeaseHeldError

__all__ = ["Handler", "add_global_options", "config_of", "csv_list", "engine_message",
           "own_process", "run", "stage_parser", "stage_main"]

Handler = Callable[[argparse.Namespace, Config], int]  # parsed arguments, config → exit code


def csv_list(value: str) -> list[str]:
    """A comma-separated option's values (blanks dropped)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def add_global_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--lake", help="lake root directory (default from conf: ./lake)")
    ap.add_argument("--catalog", help="catalog.schema: read and write metastore tables there "
                    "(default from conf: none, tables by path)")
    ap.add_argument("--conf", help="TOML config file (default conf/binlake.toml)")
    ap.add_argument("--spark-remote", help="Spark Connect URL sc://HOST:PORT")
    ap.add_argument("--engine", choices=["sail", "spark", "connect"],
                    help="engine when no session is active (default sail, embedded)")
    ap.add_argument("--defaults-file", help="MySQL option file whose [client] user/password "
                    "the source and gold connections use (docs/connections.md)")
    ap.add_argument("--wait", type=int, metavar="SECONDS",
                    help="wait this long for another writer of the stage (default 60), then exit "
                    f"{EXIT_BUSY}")
    ap.add_argument("-v", "--verbose", action="store_true")


def config_of(args: argparse.Namespace) -> Config:
    """The configuration: the TOML file and environment, then the command line's settings."""
    return load_config(args.conf, overrides={
        "lake.root": args.lake,
        "lake.catalog": args.catalog,
        "engine.remote": args.spark_remote,
        "engine.kind": args.engine,
        "source.name": getattr(args, "source", None),
        "gold.dsn": getattr(args, "gold_dsn", None),
        "source.defaults_file": args.defaults_file, "gold.defaults_file": args.defaults_file,
        "lease.wait_seconds": args.wait,
    })


def engine_message(exc: BaseException) -> str | None:
    """One line for an engine error (bad SQL, unknown column in SQL), else None."""
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    if not isinstance(exc, PySparkException):
        return None
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    from pipelines.lake.delta_ops import UNREADABLE_VERSION, version_unreadable

    if version_unreadable(exc):  # not the SQL's fault: the engine's time travel
        return f"{UNREADABLE_VERSION} ({first[:200]})"
    return f"bad SQL: {first}"[:500]


def run(args: argparse.Namespace, handler: Handler) -> int:
    """Run ``handler`` with the configuration ``args`` give (after
    :func:`~pipelines.lake.root.check_command_lake`); the process's exit code: 2 for a
    configuration error, 75 when another writer holds the stage, 1 for any other error (one
    line each; ``-v``: an engine error's whole traceback)."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = config_of(args)
        from pipelines.lake.root import check_command_lake

        check_command_lake(getattr(args, "command", ""), cfg)  # a --lake naming no lake
        from pipelines.lake.s3_client import export_engine_env

        export_engine_env(cfg.storage, cfg.lake.root)  # an s3:// lake: the engine's AWS_* env
        return handler(args, cfg)
    except ConfigError as exc:
        print(f"binlake: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except LeaseHeldError as exc:
        print(f"binlake: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY  # docs/concurrency.md
    except BinlakeError as exc:
        print(f"binlake: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as exc:  # the core wheel leaves the engine to the platform
        if (exc.name or "").split(".")[0] not in ("pyspark", "pysail", "delta"):
            raise
        print(f"binlake: error: {args.command} needs {exc.name}: run it where Spark is provided "
              f"(a cluster, spark-submit) or pip install 'binlake[local]'", file=sys.stderr)
        return 1
    except Exception as exc:  # engine errors (bad SQL) as one line, anything else raised
        message = engine_message(exc)
        if message is None or args.verbose:  # -v: the whole traceback
            raise
        print(f"binlake: error: {message}", file=sys.stderr)
        return 1


def own_process() -> bool:
    """Whether this Python is binlake's own (not one Spark or Databricks started, whose
    platform code goes on after ours); there, the interpreter's teardown is skipped at exit.

    Teardown: after the last line, Python clears every module and collects their objects'
    cycles: with pyspark, pandas, pyarrow and the engine loaded, ~0.4 s of every command (a
    small file's ``binlake index`` is ~2 s). ``gc.freeze()`` is registered before the command
    runs, so it runs after every exit handler the command registers (they run last to first:
    the engine's stop, the workers' cleanup), and leaves the objects alive then to the
    operating system. Exit handlers, file closing and the flushing of output still run; only
    the collection of cycles at exit is skipped (which Python does not promise for objects
    alive at exit either)."""
    from pipelines.engine.session import launched_by_spark

    if launched_by_spark():
        return False
    atexit.register(gc.freeze)
    return True


class _OneCommand:
    """Stands for ``binlake``'s sub-parsers to a command module's ``add_parser``: the parser
    of ``command`` is a flat one with the global options; the module's other commands are
    left out."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.parser: argparse.ArgumentParser | None = None

    def add_parser(self, name: str, *, help: str | None = None,  # noqa: A002 - argparse's
                   **kwargs) -> argparse.ArgumentParser:
        if name != self.command:
            return argparse.ArgumentParser(add_help=False)  # another command of the module
        ap = argparse.ArgumentParser(prog=f"binlake {name}", description=help, **kwargs)
        add_global_options(ap)
        ap.set_defaults(command=name)
        self.parser = ap
        return ap


def stage_parser(command: str, add_parser: Callable[[object], None]
                 ) -> argparse.ArgumentParser:
    """The flat parser of one stage's job entry point: the global options and ``binlake
    <command>``'s own (those its module's ``add_parser`` adds), in any order (its usage line
    says ``binlake <command>``: the same command)."""
    one = _OneCommand(command)
    add_parser(one)
    assert one.parser is not None, f"{add_parser.__module__} adds no {command!r} command"
    return one.parser


def stage_main(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Job entry point of one stage: the handler of the command ``parser``
    (:func:`stage_parser`) reads from ``argv`` (default: the command line)."""
    own_process()
    args = parser.parse_args(argv)
    return run(args, args.handler)
