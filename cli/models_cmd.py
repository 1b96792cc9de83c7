"""``amber models list`` and ``amber doctor``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ambereval.cli.output import handled, print_json, stdout
from ambereval.models import known_models
from ambereval.models.doctor import doctor_report

app = typer.Typer(no_args_is_help=True, help="Local judge and embedding models.")
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.command("list")
def list_cmd(as_json: Json = False) -> None:
    """Show the known models: where they are, their sha256 and size.

    Example: amber models list --json
    """
    with handled():
        models = [m.as_dict() for m in known_models()]
    if as_json:
        print_json(models)
        return
    table = Table("name", "kind", "present", "bytes", "sha256", "path")
    for m in models:
        table.add_row(m["name"], m["kind"], "yes" if m["present"] else "no",
                      str(m["bytes"] or "-"), (m["sha256"] or "-")[:16], m["path"] or "-")
    stdout.print(table)


def doctor_cmd(as_json: Json = False) -> None:
    """Check the install: llama.cpp build flags and CPU features, models, offline readiness.

    Example: amber doctor
    """
    with handled():
        report = doctor_report()
    if as_json:
        print_json(report)
    else:
        llama = report["llama_cpp"]
        stdout.print(f"llama-cpp-python: {llama.get('installed') or 'not installed'}")
        if llama.get("installed"):
            stdout.print(f"  features in use: {', '.join(llama['features_in_use'])}")
            stdout.print(f"  portable build (no AVX-512/AMX): {llama['portable']}")
        stdout.print(f"CPU flags: {', '.join(report['cpu_flags'])}")
        torch = report["torch"]
        stdout.print(f"torch: {torch['version']} (CPU build: {torch['cpu_build']})")
        stdout.print(f"faiss-cpu: {report['faiss']}; sentence-transformers: "
                     f"{report['sentence_transformers']}")
        for m in report["models"]:
            state = f"{m['sha256']} ({m['bytes']} bytes)" if m["present"] else "MISSING"
            stdout.print(f"{m['kind']} {m['name']}: {state}")
        stdout.print(f"offline ready: {report['offline_ready']}")
    if not report["offline_ready"]:
        raise typer.Exit(1)
