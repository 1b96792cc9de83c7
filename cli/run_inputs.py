"""Reading a run's inputs from where the run was made (``resume``, ``rerun``, ``replay``)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ambereval.cli.output import stderr


def from_where_it_was_made(run_dir: Path) -> Path:
    """``run_dir`` made absolute; when the run's relative input paths (bundles, tasks) are
    found only from the directory the run was made in, the process moves there, with a
    one-line note, so they resolve as they did (the run's files keep their names)."""
    from ambereval.engine.runs.invocation import inputs_home

    run_dir = run_dir.resolve()
    home = inputs_home(run_dir)
    if home is not None:
        try:
            os.chdir(home)
        except OSError:
            return run_dir  # stay: the inputs will be reported missing from here
        stderr.print(f"amber: note: reading the run's inputs from {home}, where it was made",
                     markup=False)
    return run_dir


def given_options(ctx: typer.Context, exclude: frozenset[str] = frozenset()) -> list[str]:
    """The options of the command running in ``ctx`` (a ``typer.Context``) that were given
    on its command line or through the environment, by their first flag, in the command's
    order; ``exclude`` holds parameter names."""
    return [param.opts[0] for param in ctx.command.params
            if param.param_type_name == "option" and param.name not in exclude
            and getattr(ctx.get_parameter_source(param.name), "name", "DEFAULT")
            in ("COMMANDLINE", "ENVIRONMENT")]
