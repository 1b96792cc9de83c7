"""One place for CLI output: JSON, one-line errors, progress on stderr."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from ambereval.errors import AmberError

if TYPE_CHECKING:
    from rich.console import Console


class LazyConsole:
    """A rich ``Console`` made on first use: importing rich costs start-up time that
    ``--json`` output and one-line errors never need."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)


stderr = LazyConsole(stderr=True, highlight=False, soft_wrap=True)
stdout = LazyConsole(highlight=False, soft_wrap=True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def fail(message: str, hint: str | None = None, exit_code: int = 1) -> NoReturn:
    line = f"amber: error: {message}"
    if hint:
        line += f" (hint: {hint})"
    sys.stderr.write(line.replace("\n", " ") + "\n")
    raise typer.Exit(exit_code)


@contextmanager
def handled(interrupted: str = "what was captured so far is kept") -> Iterator[None]:
    """Turn library errors into one line on stderr and a stable exit code; Ctrl-C says
    ``interrupted`` (what is kept, how to go on) and exits 130."""
    try:
        yield
    except AmberError as err:
        fail(str(err), err.hint, err.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write(f"amber: interrupted; {interrupted}\n")
        raise typer.Exit(130) from None
    except OSError as err:
        fail(*os_error_line(err))


# a path that is not what it must be (missing, a directory, a file): bad input, exit 2;
# other OS errors (permissions, a full disk) are failures, exit 1
_BAD_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError)


def os_error_line(err: OSError) -> tuple[str, str | None, int]:
    """``path: what is wrong`` for an operating-system error, with its exit code."""
    what = err.strerror.lower() if err.strerror else str(err)
    code = 2 if isinstance(err, _BAD_PATH_ERRORS) else 1
    return (f"{err.filename}: {what}" if err.filename else what), None, code


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A progress callback drawing on stderr, silent when not a terminal or disabled."""
    if not enabled or not sys.stderr.isatty():
        yield lambda phase, done, total: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=stderr.console, transient=True) as bar:
        tasks: dict[str, Any] = {}
        lock = threading.Lock()  # workers report progress from their own threads

        def update(phase: str, done: int, total: int) -> None:
            with lock:
                if phase not in tasks:
                    tasks[phase] = bar.add_task(phase, total=total)
                bar.update(tasks[phase], completed=done, total=total)

        yield update


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def run_summary(stats: dict[str, Any]) -> None:
    """The end-of-run account: judge calls, ledger hits, tokens, retries, throttles,
    errors, wall time and where the work ran."""
    t = stats.get("totals", {})
    ex = stats.get("executor", {})
    where = ex.get("name", "?") + (
        f" x{ex['reports_at_once']}" if "reports_at_once" in ex
        else f" ({_count(ex['nodes'], 'node')})" if "nodes" in ex
        else f" ({_count(ex['workers'], 'worker')} x "
             f"{_count(ex['threads_per_worker'], 'thread')}"
             + (f", {ex['restarts']} restarted" if ex.get("restarts") else "") + ")"
        if "workers" in ex else "")
    n = stats.get("reports", 0)
    stdout.print(
        f"{n} report{'' if n == 1 else 's'} in {stats.get('wall_seconds', 0):.1f} s ({where}); "
        f"judge: {t.get('calls', 0)} calls, {t.get('ledger_hits', 0)} from the ledger, "
        f"{t.get('prompt_tokens', 0)} prompt + {t.get('completion_tokens', 0)} generated "
        f"tokens, {t.get('retries', 0)} retries, {t.get('throttled', 0)} throttled (429/503), "
        f"{t.get('errors', 0)} unusable answers")
    for protocol, row in (stats.get("spent") or {}).get("protocols", {}).items():
        cached = row.get("cached_tokens", 0)
        stdout.print(f"  {protocol}: {row['calls']} judge calls, {row['ledger']} answered "
                     f"by the ledger, {row['prompt_tokens']:,} prompt"
                     + (f" ({cached:,} cached)" if cached else "")
                     + f" + {row['completion_tokens']:,} generated tokens", markup=False)


def warn_if_damaged(bundles: list[Any]) -> None:
    """One warning line per bundle that is unfinished or no longer matches its manifest:
    its evidence is judged as it is, but the reader is told (`amber bundle verify`)."""
    from ambereval.snapshots.bundle.verify import integrity_warning

    for bundle in bundles:
        problem = integrity_warning(bundle)
        if problem:
            stderr.print(f"amber: warning: {problem}", markup=False)


def truncation_warning(truncated: int) -> None:
    """One line on stderr when prompts were cut to fit the judge's context: those judge
    calls did not see all of their evidence."""
    if truncated:
        were = "prompts were" if truncated != 1 else "prompt was"
        stderr.print(f"amber: warning: {truncated} judge {were} "
                     "cut to fit the judge's context, so the judge did not see all of the "
                     "evidence (raise --judge-ctx; the ledger records what was cut)",
                     markup=False)


def print_scores(title: str, columns: list[str], systems: list[dict[str, Any]]) -> None:
    """Scores per system: one row per system when the table fits the terminal, else one
    row per dimension (a run of every protocol has ~15 dimensions; squeezed into 80
    columns each header would shrink to one letter)."""
    from rich.measure import Measurement
    from rich.table import Table

    from ambereval.cli.terminal_text import escape  # names come from bundles: no ESC

    def fmt(value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    wide = Table("system", "reports", *columns, title=title)
    for row in systems:
        wide.add_row(escape(str(row["system"])), fmt(row.get("reports")),
                     *[fmt(row.get(c)) for c in columns])
    console = stdout.console
    unbounded = console.options.update(max_width=1 << 20)
    if Measurement.get(console, unbounded, wide).maximum <= console.width:
        console.print(wide)
    else:
        tall = Table("dimension", *[escape(f"{s['system']} ({s.get('reports', '?')})")
                                    for s in systems], title=title)
        for column in columns:
            tall.add_row(escape(column), *[fmt(s.get(column)) for s in systems])
        console.print(tall)
    for row in systems:  # the games behind a pooled win rate, per judge
        for column, games in sorted((row.get("pooled") or {}).items()):
            per_judge = "; ".join(
                f"{escape(j)} {g['wins']}-{g['losses']}-{g['ties']} -> {fmt(g['win_rate'])}"
                for j, g in games.items())
            if per_judge:
                console.print(f"{escape(str(row['system']))} {column}, games pooled "
                              f"(wins-losses-ties): {per_judge}", highlight=False)
