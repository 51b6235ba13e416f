"""``binlake sql`` without a query: an interactive SQL shell over the lake's views.

- Statements end with ``;`` and may span lines (``;`` inside quotes does not count); the
  prompt ``binlake>`` becomes ``     ->`` while a statement is open.
- History across runs in a readline history file (``~/.binlake_history``, or
  ``$BINLAKE_HISTORY``); one entry per statement, multi-line statements joined.
- ``\\d`` lists the tables and views with their row counts, ``\\d NAME`` a view's columns,
  ``\\q`` (or Ctrl-D) quits, ``\\?`` helps.
- Errors print as one line (``error: …``), never a traceback; Ctrl-C cancels the running
  statement (``cancelled``: pyspark interrupts the operation; the embedded engine may still
  finish the work already running before the next statement, and ``\\q`` then quits at
  once) or clears the statement being typed.
- Results print as tables (at most ``--limit`` rows); on a terminal they go through a pager
  (``$PAGER``, default ``less -FRSX``: it exits at once when the table fits the screen).
  Without a terminal (statements piped in) there is no prompt and no pager.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from typing import Any, Callable, Iterator, TextIO

from pipelines.history.text_table import CELL_WIDTH, ascii_table, fit, plain_text, rows_line

__all__ = ["Shell", "split_statements", "render_table", "run_shell"]

PROMPT = "binlake> "
MORE = "     -> "
HELP = ("\\d            tables and views, with row counts\n"
        "\\d NAME       columns of NAME\n"
        "\\q            quit (or Ctrl-D)\n"
        "SQL ending in ;  run it (Spark SQL; statements may span lines)")


def split_statements(text: str) -> tuple[list[str], str]:
    """(complete statements, unfinished rest) of ``text``: split on ``;`` outside quotes
    (``'…'``, ``"…"``, ```…```, backslash escapes inside quotes) and ``--`` comments."""
    done: list[str] = []
    start, quote, i = 0, "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == ";":
            stmt = text[start:i].strip()
            if stmt:
                done.append(stmt)
            start = i + 1
        i += 1
    return done, text[start:]


def render_table(columns: list[str], rows: list[list[str]], *, more: bool) -> str:
    """An ASCII table; a footer counts the rows (and says when more were left out)."""
    return ascii_table(columns, rows) + "\n" + rows_line(len(rows), None if more else 0)


def _cell(value) -> str:
    return "NULL" if value is None else fit(plain_text("", value), CELL_WIDTH)


def _one_line(exc: BaseException) -> str:
    from pipelines.lake.delta_ops import UNREADABLE_VERSION, version_unreadable

    if version_unreadable(exc):
        return UNREADABLE_VERSION
    text = str(exc).strip() or type(exc).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("JVM stacktrace", "at ")):
            return line[:300]
    return type(exc).__name__


class Shell:
    """The read-eval-print loop; I/O streams and the pager are injectable."""

    def __init__(self, spark, *, limit: int = 1000, out: TextIO = sys.stdout,
                 interactive: bool = False, pager: str | None = None,
                 history_file: str | None = None) -> None:
        self.spark = spark
        self.limit = limit
        self.out = out
        self.interactive = interactive
        self.pager = pager
        self.history_file = history_file
        self._readline = None
        self.cancelled_work = False  # a statement was cancelled with Ctrl-C
        self._interrupting: threading.Thread | None = None  # an interrupt request in flight

    # -- history -------------------------------------------------------------------------
    def _load_history(self) -> None:
        if not (self.interactive and self.history_file):
            return
        try:
            import readline
        except ImportError:  # no readline on this platform: no history, still a shell
            return
        self._readline = readline
        readline.set_auto_history(False)
        readline.set_history_length(1000)
        try:
            readline.read_history_file(self.history_file)
        except OSError:
            pass

    def _remember(self, entry: str) -> None:
        rl = self._readline
        if rl is None:
            return
        rl.add_history(" ".join(entry.split("\n")))
        try:
            rl.write_history_file(self.history_file)
        except OSError as exc:
            self._print(f"warning: cannot write history {self.history_file}: {exc.strerror}")
            self._readline = None

    # -- output --------------------------------------------------------------------------
    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _show(self, text: str) -> None:
        if not (self.interactive and self.pager):
            self._print(text)
            return
        proc = None
        try:
            proc = subprocess.Popen(shlex.split(self.pager), stdin=subprocess.PIPE, text=True)
            proc.communicate(text + "\n")
        except KeyboardInterrupt:  # Ctrl-C reaches the pager too; it decides when to end
            if proc is not None:
                proc.wait()
        except (OSError, ValueError) as exc:
            self._print(f"warning: pager {self.pager!r} failed ({exc}); printing instead")
            self._print(text)

    def _cancelled(self) -> None:
        # The embedded engine (Sail) drops the operation but not the work already running:
        # the next statement waits for it, and a normal exit would too (run_shell).
        self.cancelled_work = True
        self._print("cancelled (the engine may finish its running work first)")

    # -- commands ------------------------------------------------------------------------
    def _interruptible(self, work: Callable[[], Any]) -> Any:
        """``work()``'s result (or its exception), computed in a thread while this thread
        waits in short steps: Ctrl-C then reaches the shell at once (a signal waits while the
        main thread blocks inside the engine client's network call), the engine is asked to
        interrupt its operations and KeyboardInterrupt is raised; the abandoned thread ends
        when the engine gives up the operation."""
        pending = self._interrupting
        while pending is not None and pending.is_alive():  # it must not stop this statement
            pending.join(0.05)
        self._interrupting = None
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc

        thread = threading.Thread(target=run, name="binlake-sql", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.05)
        except KeyboardInterrupt:
            self._ask_to_interrupt()
            raise
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _ask_to_interrupt(self, wait: float = 1.0) -> None:
        """Ask the engine to interrupt its operations, waiting at most ``wait`` seconds for the
        answer: an engine whose threads are all busy with the statement may take minutes to
        answer the request, and the shell must come back to its prompt at once."""
        def ask() -> None:
            try:
                self.spark.interruptAll()
            except Exception:  # noqa: BLE001 - an engine without interrupts: just stop waiting
                pass

        asking = threading.Thread(target=ask, name="binlake-sql-interrupt", daemon=True)
        asking.start()
        asking.join(wait)
        self._interrupting = asking  # the next statement waits for the answer first

    def run_sql(self, stmt: str) -> bool:
        """Run one statement and show its result; False (after a one-line error) on failure."""
        def fetch() -> tuple[list, list]:
            df = self.spark.sql(stmt)
            columns = df.columns
            return columns, (df.limit(self.limit + 1).collect() if columns else [])

        try:
            columns, rows = self._interruptible(fetch)
        except KeyboardInterrupt:  # Ctrl-C: the engine was asked to interrupt it
            self._cancelled()
            return False
        except Exception as exc:  # noqa: BLE001 - every engine error becomes one line
            self._print(f"error: {_one_line(exc)}")
            return False
        if not columns:
            self._print("OK")
            return True
        cells = [[_cell(r[i]) for i in range(len(columns))] for r in rows[:self.limit]]
        self._show(render_table(columns, cells, more=len(rows) > self.limit))
        return True

    def meta(self, line: str) -> bool:
        """A backslash command; False to quit."""
        cmd, _, arg = line.strip().partition(" ")
        arg = arg.strip().rstrip(";")
        try:
            if cmd == "\\q":
                return False
            if cmd == "\\d" and not arg:
                self._interruptible(self._list)
            elif cmd == "\\d":
                self._interruptible(lambda: self._describe(arg))
            else:
                self._print(HELP)
        except KeyboardInterrupt:
            self._cancelled()
        except Exception as exc:  # noqa: BLE001
            self._print(f"error: {_one_line(exc)}")
        return True

    def _list(self) -> None:
        rows = []
        for t in sorted(self.spark.catalog.listTables(), key=lambda t: t.name):
            count = self.spark.table(t.name).count()
            rows.append([t.name, "view" if t.isTemporary else "table", str(count)])
        self._show(render_table(["name", "kind", "rows"], rows, more=False))

    def _describe(self, name: str) -> None:
        fields = self.spark.table(name).schema.fields
        rows = [[f.name, f.dataType.simpleString(), "yes" if f.nullable else "no"] for f in fields]
        self._show(render_table(["column", "type", "nullable"], rows, more=False))

    # -- loop ----------------------------------------------------------------------------
    def run(self, read_line: Callable[[str], str]) -> int:
        """Read lines with ``read_line(prompt)`` (raising EOFError at the end) until quit;
        return the exit code (1 when a non-interactive run had an error)."""
        self._load_history()
        if self.interactive:
            self._print("binlake SQL shell: statements end with ;  \\d lists views, "
                        "\\? helps, \\q quits")
        pending, failed = "", False
        while True:
            prompt = (MORE if pending.strip() else PROMPT) if self.interactive else ""
            try:
                line = read_line(prompt)
            except EOFError:
                if self.interactive:
                    self._print("")
                break
            except KeyboardInterrupt:
                self._print("^C")
                pending = ""
                continue
            if not pending.strip() and line.strip().startswith("\\"):
                if line.strip() != "\\q":
                    self._remember(line.strip())
                if not self.meta(line):
                    break
                continue
            statements, pending = split_statements(pending + line + "\n")
            for stmt in statements:
                self._remember(stmt + ";")
                failed |= not self.run_sql(stmt)
        if pending.strip():
            failed |= not self.run_sql(pending.strip())
        return 1 if failed and not self.interactive else 0


def _lines(stream: TextIO) -> Callable[[str], str]:
    it: Iterator[str] = iter(stream)

    def read(_prompt: str) -> str:
        try:
            return next(it).rstrip("\n")
        except StopIteration:
            raise EOFError from None

    return read


def run_shell(spark, *, limit: int = 1000) -> int:
    """The shell on this process's terminal (or on piped stdin)."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    history = os.environ.get("BINLAKE_HISTORY") or os.path.join(
        os.path.expanduser("~"), ".binlake_history")
    shell = Shell(spark, limit=limit, interactive=interactive,
                  pager=os.environ.get("PAGER") or "less -FRSX", history_file=history)
    code = shell.run(input if interactive else _lines(sys.stdin))
    if shell.cancelled_work:
        # Quit now: stopping an in-process engine waits for the cancelled statement's work.
        # The shell has nothing of its own to flush (history is written per statement), and
        # Delta commits are atomic, so a cancelled write leaves its table as it was.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
