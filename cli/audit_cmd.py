"""``amber audit``: the evidence behind every verdict of a run, in the terminal or as a page."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ambereval.cli.output import handled, print_json, print_scores, stdout
from ambereval.cli.terminal_text import escape

COLOURS = {"pass": "green", "partial": "yellow", "fail": "red", "unknown": "bright_black",
           "info": "cyan"}


def audit_cmd(
    run_dir: Annotated[Path, typer.Argument(
        help="A run directory of `amber evaluate`, or the --out directory of `amber verify`.")],
    report: Annotated[str | None, typer.Option(
        "--report", "-r", help="Only this report (its name, file name or id prefix).")] = None,
    claim: Annotated[str | None, typer.Option(
        "--claim", "-c", help="One claim or item id (c3, coverage.2, fa.1 ...).")] = None,
    dimension: Annotated[str | None, typer.Option(
        "--dimension", "-d", help="Every item of one dimension (coverage, deepeval.depth, "
        "fac, verify ...).")] = None,
    html: Annotated[bool, typer.Option(
        "--html", help="Write RUN_DIR/audit.html: one self-contained page.")] = False,
    html_out: Annotated[Path | None, typer.Option(
        "--html-out", help="Write the page here instead of RUN_DIR/audit.html.")] = None,
    bundles: Annotated[list[Path] | None, typer.Option(
        "--bundles", help="Where to look for bundles that moved since the run "
        "(repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show which captured bytes justified each verdict.

    For each verdict: the judge's answer and quote (from the ledger), and the evidence
    passages with URL, capture time, WARC file and record id, offsets and ledger key.

    Example: amber audit run/ --claim c3      (or: amber audit run/ --html)
    """
    from ambereval.engine.runs.audit import load_audit, select_items
    from ambereval.netguard import install_offline_guard

    install_offline_guard()  # reads files only: offline means offline

    with handled():
        audit = load_audit(run_dir, list(bundles or []))
        pairs = select_items(audit, report, claim, dimension)
        path = None
        if html or html_out:
            from ambereval.engine.runs.audit_html import write_audit_html

            path = write_audit_html(audit, html_out or run_dir / "audit.html")
    for warning in audit.warnings:
        typer.echo(f"amber: warning: {warning}", err=True)
    detail = claim is not None or dimension is not None
    if as_json:
        doc: dict[str, Any] = {"source": audit.source, "kind": audit.kind,
                               "columns": audit.columns, "systems": audit.systems,
                               "warnings": audit.warnings}
        if path is not None:
            doc["html"] = str(path)
        if detail or report is not None:
            doc["items"] = [_item_json(audit, r, i) for r, i in pairs]
        else:
            doc["reports"] = [_report_json(r) for r in audit.reports]
        print_json(doc)
        return
    if detail:
        several = len({r.system for r in audit.reports}) > 1
        for rep, item in pairs:
            _print_item(audit, rep, item, several)
    else:
        _print_scores(audit)
        _print_reports(audit, report)
    if path is not None:
        stdout.print(f"audit page: {path}")


def _report_json(rep: Any) -> dict[str, Any]:
    from ambereval.engine.runs.audit import counts

    return {"key": rep.key, "name": rep.name, "report_id": rep.report_id, "bundle": rep.bundle,
            "system": rep.system, "task": rep.task, "scores": rep.scores,
            "items": len(rep.items), "outcomes": counts(rep.items)}


def _item_json(audit: Any, rep: Any, item: Any) -> dict[str, Any]:
    from dataclasses import asdict

    from ambereval.engine.runs.audit import excerpt

    doc = asdict(item)
    doc["report"] = rep.name
    doc["answers"] = {k: audit.ledger.get(k) for k in item.ledger_keys}
    for ev, out in zip(item.evidence, doc["evidence"], strict=True):
        page = audit.pages.get(ev.warc_record_id or "")
        out["title"] = (page or {}).get("title")
        for p, p_out in zip(ev.passages, out["passages"], strict=True):
            p_out["text"] = excerpt(page, p, 4000)
    return doc


def _print_scores(audit: Any) -> None:
    print_scores(f"Scores per system — {audit.kind}: {escape(audit.source)}", audit.columns,
                 audit.systems)


def _print_reports(audit: Any, report: str | None) -> None:
    from ambereval.engine.runs.audit import OUTCOMES, counts, select_reports

    table = Table("report", "system", "items", *OUTCOMES, title="Judged items per report")
    for rep in select_reports(audit, report):
        c = counts(rep.items)
        table.add_row(escape(rep.name), escape(rep.system), str(len(rep.items)),
                      *[str(c[o]) for o in OUTCOMES])
    stdout.print(table)
    stdout.print("details: --claim ID, --dimension NAME, --report R; the page: --html")


def _print_item(audit: Any, rep: Any, item: Any, several_systems: bool = False) -> None:
    from ambereval.engine.runs.audit import excerpt

    colour = COLOURS.get(item.outcome, "white")
    # with several systems, the same report name is no address: say whose it is
    whose = f" of {escape(rep.system)}" if several_systems else ""
    stdout.print(f"[bold]{escape(item.id)}[/bold]  [{colour}]{escape(item.label)}[/{colour}]"
                 f"  {escape(item.protocol)}.{escape(item.dimension)}  judge "
                 f"{escape(item.judge)}  report {escape(rep.name)}{whose}")
    stdout.print(f"  {escape(item.text)}"
                 + (f"  [dim](report chars {item.span[0]}-{item.span[1]})[/dim]"
                    if item.span else ""))
    if item.reason:
        stdout.print(f"  reason: {escape(str(item.reason))}")
    for q in item.detail.get("questions") or []:
        stdout.print(f"  question: {escape(q['question'])} -> {escape(str(q['answer']))}")
    if not item.evidence:  # why nothing was judged: each cited page and what was wrong
        for c in item.detail.get("consistency") or []:
            if c.get("reason") and c.get("reason") != "judged":
                stdout.print(f"  cited page {escape(str(c.get('url')))}: "
                             f"{escape(str(c['reason']))}")
    for key in item.ledger_keys if not item.evidence else []:
        _print_answer(audit, key, "  ")
    for n, ev in enumerate(item.evidence, start=1):
        page = audit.pages.get(ev.warc_record_id or "")
        cited = " (cited)" if ev.cited else ""
        stdout.print(f"  evidence {n}: {escape(ev.url)}{cited}")
        if page is not None:
            stdout.print(f"    captured {page['captured_at']} (capture {ev.capture_id}), "
                         f"WARC {page['warc_file']} @ {page['warc_offset']}, conversion "
                         f"record {ev.warc_record_id}, response record "
                         f"{ev.response_record_id}")
        else:
            stdout.print(f"    capture {ev.capture_id}, conversion record "
                         f"{ev.warc_record_id} [dim](page text unavailable)[/dim]")
        if ev.question:
            stdout.print(f"    question: {escape(ev.question)}")
        if ev.answer is not None or ev.quote:
            stdout.print(f"    judge answered {escape(str(ev.answer))}"
                         + (f': "{escape(ev.quote)}"' if ev.quote else ""))
        if ev.ledger_key:
            _print_answer(audit, ev.ledger_key, "    ")
        for m, p in enumerate(ev.passages, start=1):
            score = f" score {p.score:.3f}" if p.score is not None else ""
            how = " (located from the prompt)" if p.source == "prompt" else ""
            stdout.print(f"    passage {m} (chars {p.start}-{p.end}){score}{how}:")
            stdout.print(textwrap.indent(escape(excerpt(page, p)), "      "))
    stdout.print("")


def _print_answer(audit: Any, key: str, indent: str) -> None:
    import json

    entry = audit.ledger.get(key) or {}
    if entry.get("missing"):
        stdout.print(f"{indent}ledger {key}: [red]not in the ledger[/red]")
        return
    what = entry.get("error") or json.dumps(entry.get("answer"), ensure_ascii=False,
                                            sort_keys=True)
    stdout.print(f"{indent}ledger {key}: {escape(str(what))}")
