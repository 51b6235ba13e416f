"""The ``binlake`` command line: ``main.py`` builds the parser and runs a command.

``command`` is the console script's entry point (``setup.cfg``); it imports the command
line only when called, so a module of this package imports no more than it needs."""

__all__ = ["command"]


def command() -> int:
    from pipelines.cli.main import command as run

    return run()
