"""Plain command-line values coerced without importing pydantic.

typer (0.2x) coerces every parameter value of the command being run through a pydantic
``TypeAdapter``; importing pydantic for that costs more CPU than the rest of
``amber bundle stats`` together. The values our commands take are plain: strings, integers
and decimals (within their bounds), paths, choices (``Enum``/``Literal``) and lists of these.
For those, each parameter gets a coercer built from typer's own pieces (its path checks,
its choice matching) that returns the value typer's pydantic coercion returns; anything
else, and every value that coercion would reject or clamp, is handed to typer's coercion
unchanged, so results and error messages stay typer's own (tests/test_startup.py compares
the two on every parameter of every command). With a typer that lacks these internals this
does nothing and typer coerces as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

try:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import (
        choice_coercion_annotation,
        coerce_cli_choice,
        coerce_cli_path,
        lenient_issubclass,
    )
    from typer.core import _TyperParameter
except ImportError:  # another typer: keep its own coercion
    RuntimeParam = None  # type: ignore[assignment,misc]

UNHANDLED = object()
_INT = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")

Plain = Callable[[Any, Any, Any], Any]  # (value, param, ctx) -> value or UNHANDLED


def _number(kind: type, info: Any) -> Plain | None:
    if info.min is not None and not isinstance(info.min, int | float):
        return None
    if info.max is not None and not isinstance(info.max, int | float):
        return None
    pattern = _INT if kind is int else _DECIMAL

    def coerce(value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and pattern.fullmatch(value):
            number = kind(value)
        elif type(value) is kind:
            number = value
        else:
            return UNHANDLED
        if (info.min is not None and number < info.min) or (
                info.max is not None and number > info.max):
            return UNHANDLED  # typer's own error (or clamp)
        return number

    return coerce


def _choice(choices: tuple[Any, ...], case_sensitive: bool) -> Plain:
    def coerce(value: Any, param: Any, ctx: Any) -> Any:
        if not isinstance(value, str) and value not in choices:
            return UNHANDLED
        try:
            return coerce_cli_choice(value, choices=choices, case_sensitive=case_sensitive,
                                     ctx=ctx)
        except ValueError:
            return UNHANDLED

    return coerce


def _path(kind: type, info: Any) -> Plain:
    def coerce(value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and value:
            value = kind(value)
        if not isinstance(value, kind):
            return UNHANDLED
        return coerce_cli_path(value, info, path_type=kind, param=param, ctx=ctx)

    return coerce


def _leaf(annotation: Any, info: Any) -> Plain | None:
    if info.parser is not None:
        return None
    choice = choice_coercion_annotation(annotation, info)
    if choice is not None:
        return _choice(*choice)
    if annotation is int or annotation is float:
        return _number(annotation, info)
    if annotation is str:
        return lambda value, param, ctx: value if type(value) is str else UNHANDLED
    if annotation is bool:
        return lambda value, param, ctx: value if type(value) is bool else UNHANDLED
    if (isinstance(annotation, type) and lenient_issubclass(annotation, Path)
            and info.path_type is None):
        return _path(annotation, info)
    return None


def plain_coercer(descriptor: Any) -> Plain | None:
    """A pydantic-free coercer for the parameter, or None when typer's own is needed."""
    if descriptor.file_annotation is not None:
        return None
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if get_origin(annotation) is list:
        args = get_args(annotation)
        leaf = _leaf(args[0], info) if len(args) == 1 else None
        if leaf is None:
            return None

        def coerce_list(value: Any, param: Any, ctx: Any) -> Any:
            if not isinstance(value, list | tuple):
                return UNHANDLED
            items = [leaf(item, param, ctx) for item in value]
            return UNHANDLED if any(i is UNHANDLED for i in items) else items

        return coerce_list
    if get_origin(annotation) is not None:
        return None
    return _leaf(annotation, info)


if RuntimeParam is not None:
    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):
        """Plain values here; the rest through typer's pydantic coercion."""

        descriptor: TypeDescriptor
        plain: Plain

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            result = self.plain(value, param, ctx)
            if result is not UNHANDLED:
                return result
            typer_own = build_runtime_param(self.descriptor)
            return typer_own._coerce_value(value, param=param, ctx=ctx)


def install() -> None:
    """Have typer build a plain coercer for every parameter where one suffices (every
    command's parameters and the ``--help`` option typer adds to each); idempotent."""
    if RuntimeParam is None or getattr(_TyperParameter.get_runtime_param, "plain", False):
        return
    typer_own = _TyperParameter.get_runtime_param

    def get_runtime_param(self: Any) -> Any:
        descriptor = getattr(self, "type_descriptor", None)
        if self._runtime_param is None and descriptor is not None:
            plain = plain_coercer(descriptor)
            if plain is not None:
                self._runtime_param = PlainRuntimeParam(
                    parameter_info=descriptor.parameter_info,
                    annotation=descriptor.annotation, descriptor=descriptor, plain=plain)
        return typer_own(self)

    get_runtime_param.plain = True  # type: ignore[attr-defined]
    _TyperParameter.get_runtime_param = get_runtime_param
