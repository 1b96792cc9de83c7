"""``amber aggregate dailyreport``: recompute DailyReport's aggregates from any scores;
``amber aggregate run``: a run's system figures again, from its per-report documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ambereval.cli.output import handled, print_json, stdout
from ambereval.engine.protocols.dailyreport_math import (
    EVALUATE_ONLY,
    RULE_CHOICES,
    aggregate,
    parse_rules,
    parse_scores,
)

app = typer.Typer(no_args_is_help=True, help="Recompute a protocol's aggregates from scores.")


@app.command("dailyreport")
def dailyreport_cmd(
    scores: Annotated[Path, typer.Argument(help='{"subtasks": [{id, importance, group?, ins, '
                                                'fac?, rat?}]}')],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    rule: Annotated[list[str] | None, typer.Option(
        "--rule", help="Switch a rule that acts on scores "
        f"({', '.join(sorted(set(RULE_CHOICES) - EVALUATE_ONLY))}), e.g. c1_empty=zero "
        "(repeatable).")] = None,
) -> None:
    """Ins, Fac, Rat (cascade), SubTask Pass, UserPref (Algorithm 1) and every o_k.

    Example: amber aggregate dailyreport scores.json --json
    """
    from ambereval.errors import InputError

    with handled():
        if scores.is_dir():
            raise InputError(f"{scores}: is a directory, not a scores JSON file")
        if not scores.is_file():
            raise InputError(f"{scores}: no such file")
        try:
            doc = json.loads(scores.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{scores}: not valid JSON ({exc})") from None
        rules = parse_rules(rule)
        unused = sorted({r.partition("=")[0].strip() for r in rule or []} & EVALUATE_ONLY)
        if unused:  # they act while judging, on claims this command never sees
            raise InputError(f"rule {unused[0]} acts inside `amber evaluate`, not on scores",
                             hint="give it to amber evaluate --rule")
        subtasks = parse_scores(doc, str(scores))
        if not subtasks:
            raise InputError(f"{scores}: no subtasks to aggregate",
                             hint="each subtask: id, importance, ins, and fac, rat or "
                             "group when it has them")
        result = aggregate(subtasks, rules)
    if as_json:
        print_json(result)
        return
    table = Table(show_header=False, title="DailyReport")
    for key in ("ins", "fac", "rat", "subtask_pass", "user_pref"):
        value = result[key]
        table.add_row(key, "null" if value is None else f"{value:.4g}")
    stdout.print(table)


@app.command("run")
def run_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of `amber evaluate`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    rule: Annotated[list[str] | None, typer.Option(
        "--rule", help="Switch an aggregation rule (depth_no_decisive=null|zero, "
        "deepeval_average=table1|all6); default: as the run recorded (repeatable).")] = None,
) -> None:
    """A run's system table again, from its reports, as the published tables aggregate.

    DeepEval depth pooled per judge, summaries from column means; no judge is asked.

    Example: amber aggregate run runs/lrb --rule depth_no_decisive=zero
    """
    from ambereval.cli.output import print_scores
    from ambereval.engine.runs.reaggregate import aggregate_run

    with handled():
        result = aggregate_run(run_dir, rule)
    if as_json:
        print_json(result)
        return
    print_scores(f"Run {run_dir} ({result['aggregation']}, "
                 f"{', '.join(f'{k}={v}' for k, v in result['rules'].items())})",
                 result["columns"], result["systems"])
    if result["missing"]:
        stdout.print(f"{len(result['missing'])} planned reports not written (the run did "
                     "not finish): left out")
