"""``amber report inspect``: show how Amber parses a report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from ambereval.cli.output import handled, print_json, stdout
from ambereval.engine.report import load_report

app = typer.Typer(no_args_is_help=True, help="Parse and inspect research reports.")


@app.command("inspect")
def inspect_cmd(
    report: Annotated[Path, typer.Argument(help="A Markdown report.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole parse as JSON.")]
    = False,
) -> None:
    """Sections, citations (with resolved URLs), references and problems, with offsets.

    The text view counts them and lists each problem with its line; --json prints every
    element with its character offsets.

    Example: amber report inspect report.md --json
    """
    with handled():
        parsed = load_report(report)
    if as_json:
        print_json(parsed.as_dict())
        return
    from rich.table import Table  # the table view only: rich is slow to import

    table = Table(title=str(report), show_header=False)
    table.add_row("characters", str(len(parsed.text)))
    table.add_row("sections", str(len(parsed.sections)))
    table.add_row("sentences", str(len(parsed.sentences)))
    kinds = Counter(c.kind for c in parsed.citations)
    table.add_row("citations", f"{len(parsed.citations)} " + ", ".join(
        f"{k}: {n}" for k, n in sorted(kinds.items())))
    table.add_row("references", str(len(parsed.references)))
    table.add_row("problems", str(len(parsed.problems)))
    stdout.print(table)
    for problem in parsed.problems[:50]:
        where = (f"line {parsed.text.count(chr(10), 0, problem.start) + 1}: "
                 if problem.start is not None else "")
        stdout.print(f"{where}{problem.kind}: {problem.message}", markup=False)
    if len(parsed.problems) > 50:
        stdout.print(f"... and {len(parsed.problems) - 50} more problems (--json lists all)")
