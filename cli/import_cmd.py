"""``amber import``: published benchmark data -> Amber tasks (and bundles)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ambereval.cli.output import handled, print_json, stdout

app = typer.Typer(no_args_is_help=True, help="Import benchmark tasks and corpora.")


@app.command("lrb")
def lrb_cmd(
    checklist: Annotated[Path, typer.Argument(help="LiveResearchBench checklist CSV.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Tasks JSON to write.")],
    reports: Annotated[Path | None, typer.Option(
        help="Folder of <model>/qid_<qid>_report.md.")] = None,
    baselines: Annotated[Path | None, typer.Option(
        help="Folder of baseline qid_<qid>_report.md (for pairwise depth).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """One task per qid with its coverage checklist (and baseline, reports found).

    Example: amber import lrb coverage_checklist.csv --baselines reference_reports --out lrb.json
    """
    from ambereval.engine.importers import import_lrb
    from ambereval.engine.tasks import dump_tasks

    with handled():
        tasks = import_lrb(checklist, reports, baselines)
        dump_tasks(tasks, out)
    summary = {"tasks": len(tasks), "checklist_items": sum(len(t.checklist) for t in tasks),
               "with_baseline": sum(1 for t in tasks if t.baseline_report),
               "with_reports": sum(1 for t in tasks if t.meta.get("reports")), "out": str(out)}
    if as_json:
        print_json(summary)
    else:
        stdout.print(f"wrote {summary['tasks']} tasks ({summary['checklist_items']} checklist "
                     f"items, {summary['with_baseline']} with a baseline) to {out}")


@app.command("dr3")
def dr3_cmd(
    dataset: Annotated[Path, typer.Argument(help="DR3-Eval dataset folder (query.jsonl, NNN/).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for tasks.json and bundles/.")],
    size: Annotated[str, typer.Option(help="Sandbox corpus size: 32k, 64k, ... 512k.")] = "32k",
    reports: Annotated[Path | None, typer.Option(
        help="A <ctx>/<model> folder of NNN/final_report.md to store in the bundles.")] = None,
    system: Annotated[str | None, typer.Option(
        help="The system the --reports are from, as a run's table names it (default: the "
        "<model> folder's name).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Tasks plus one bundle per task holding its sandbox corpus as WARC resource records.

    Example: amber import dr3 DR3-Eval/data --out dr3/ --size 32k
    """
    from ambereval.engine.importers import import_dr3
    from ambereval.engine.tasks import dump_tasks

    with handled():
        tasks = import_dr3(dataset, out, size, reports, system)
        dump_tasks(tasks, out / "tasks.json")
    summary = {"tasks": len(tasks), "bundles": str(out / "bundles"),
               "with_report": sum(1 for t in tasks if t.report),
               "tasks_file": str(out / "tasks.json")}
    if as_json:
        print_json(summary)
    else:
        stdout.print(f"wrote {summary['tasks']} tasks to {summary['tasks_file']} and their "
                     f"bundles under {summary['bundles']}")
