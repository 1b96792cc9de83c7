"""Commands whose module is imported only when the command runs.

``amber --help`` lists every command from a one-line summary kept next to its
registration, so printing it imports no command module; ``amber bundle stats ...`` imports
``bundle_cmd`` and nothing else of the CLI. Each command is built exactly as
``app.command(name)(fn)`` / ``app.add_typer(sub, name=name)`` would build it, so its options
and help are unchanged; tests/test_startup.py checks that against the eager registration
and that every summary matches the command's own help.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """One ``amber`` command: ``target`` is ``"module:attribute"`` in ``ambereval.cli``,
    a command function (registered like ``app.command``) or a ``typer.Typer`` (registered
    like ``app.add_typer``); ``summary`` is the first paragraph of its help, as the command
    list of ``amber --help`` prints it."""

    name: str
    target: str
    summary: str

    def resolve(self) -> Any:
        """The command function or ``typer.Typer`` (imports its module)."""
        module, attribute = self.target.split(":")
        return getattr(importlib.import_module(f"ambereval.cli.{module}"), attribute)

    def register(self, app: typer.Typer) -> None:
        """Register on ``app`` the eager way (``app.command`` / ``app.add_typer``)."""
        obj = self.resolve()
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=self.name)
        else:
            app.command(self.name)(obj)

    def load(self) -> Any:
        """The click command, built as the eager registration builds it."""
        holder = typer.Typer()
        self.register(holder)
        return typer.main.get_group(holder).commands[self.name]

    def placeholder(self) -> TyperCommand:
        """What a command list needs (name and help), without importing the module."""
        return TyperCommand(self.name, help=self.summary)


def summary_of(command: Any) -> str:
    """The first paragraph of a command's help, as a command list prints it."""
    return inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0].strip()


class _Commands(MutableMapping[str, Any]):
    """A group's commands: the registered ones, then the lazy ones, loaded on first use."""

    def __init__(self, loaded: MutableMapping[str, Any], lazy: tuple[LazyCommand, ...]):
        self._loaded = dict(loaded)
        self._lazy = {c.name: c for c in lazy if c.name not in self._loaded}
        self._order = [*self._loaded, *self._lazy]

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded

    def lazy(self, name: str) -> LazyCommand | None:
        return self._lazy.get(name)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in self._lazy:
                raise KeyError(name)
            self._loaded[name] = self._lazy[name].load()
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self._order:
            self._order.append(name)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._order:
            raise KeyError(name)
        self._order.remove(name)
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._order


class LazyGroup(TyperGroup):
    """A typer group with lazily imported commands: subclass it with ``lazy_commands``
    set and pass it as ``typer.Typer(cls=...)``."""

    lazy_commands: tuple[LazyCommand, ...] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands(self.commands, self.lazy_commands)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        commands = self.commands
        assert isinstance(commands, _Commands)
        lazy = commands.lazy(cmd_name)
        if self._listing and lazy is not None and not commands.is_loaded(cmd_name):
            return lazy.placeholder()
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True  # the command list needs names and summaries only
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
