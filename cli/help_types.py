"""How ``--help`` names what an option takes: nothing for a flag, an upper-case word for a
value (``PATH``, ``TEXT``, ``INTEGER``, ``FLOAT``, the choices), never typer's Python type
placeholders (``<bool>``, ``<int range>``, ``<list[Path]>``). Installed once by
:mod:`ambereval.cli.main` before any command's help is rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

from typer.core import TyperArgument, TyperOption

_WORDS = {bool: None, int: "INTEGER", float: "FLOAT", str: "TEXT", Path: "PATH"}


def _word(annotation: Any) -> str | None:
    if get_origin(annotation) in (list, tuple):
        inner = [a for a in get_args(annotation) if a is not Ellipsis]
        word = _word(inner[0]) if inner else "TEXT"
        return f"{word}..." if word else None
    return _WORDS.get(annotation, "TEXT")


def display_word(param: Any, ctx: Any) -> str | None:
    """The word shown in the help's type column for ``param`` (None: show nothing)."""
    if param.metavar is not None:
        return param.metavar
    if isinstance(param, TyperOption) and (param.is_flag or param.count):
        return None
    descriptor = param.type_descriptor
    if descriptor.is_choice:
        return "|".join(str(c) for c in descriptor.choices or ())
    word = _word(descriptor.annotation)
    if word and isinstance(param, TyperOption):  # a repeatable option takes one per use
        word = word.removesuffix("...")
    return word


def install() -> None:
    """Replace typer's type placeholders in rich help; idempotent."""
    if getattr(TyperOption.display_type_rich, "amber", False):
        return
    display_word.amber = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_word  # type: ignore[method-assign]
    TyperArgument.display_type_rich = display_word  # type: ignore[method-assign]
