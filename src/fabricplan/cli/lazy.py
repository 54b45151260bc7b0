"""A command group that imports a command's module only when the command is used.

Each command module pulls in its own layers (congestion simulation, nccl-tests parsing,
validation data, ...); importing all of them made every command, however small, pay for every
other one at start-up. Listing the commands (``--help``, or a misspelt name that gets
suggestions) loads them all, since their help comes from their modules.
"""

from __future__ import annotations

from importlib import import_module

import typer
from typer.core import TyperCommand, TyperGroup

# Command -> (module in fabricplan.cli, function), in the order help lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "collective": ("collective_cmd", "collective"),
    "grade": ("grade_cmd", "grade_cmd"),
    "calibrate": ("calibrate_cmd", "calibrate_cmd"),
    "validate": ("grade_cmd", "validate_cmd"),
    "topology": ("topology_cmd", "topology"),
    "congestion": ("congestion_cmd", "congestion"),
    "step": ("step_cmd", "step_cmd"),
    "plan": ("plan_cmd", "plan_cmd"),
    "cost": ("cost_cmd", "cost_cmd"),
    "advise": ("advise_cmd", "advise_cmd"),
    "report": ("report_cmd", "report_cmd"),
    "providers": ("providers_cmd", "providers_cmd"),
    "claims": ("claims_cmd", "claims_cmd"),
    "serve": ("serve_cmd", "serve_cmd"),
    "sweep": ("sweep_cmd", "app"),  # a group: run, show, export
}


class LazyGroup(TyperGroup):
    """The commands of :data:`COMMANDS` first, then those registered on the app itself."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | TyperGroup | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            self.commands[cmd_name] = self._load(cmd_name)
        elif cmd_name not in self.commands:  # unknown: suggestions need every name
            for name in COMMANDS:
                self.get_command(ctx, name)
        return self.commands.get(cmd_name)

    def _load(self, name: str) -> TyperCommand | TyperGroup:
        module, function = COMMANDS[name]
        found = getattr(import_module(f"fabricplan.cli.{module}"), function)
        if isinstance(found, typer.Typer):  # a group of subcommands
            group = typer.main.get_group(found)
            group.name = name
            return group
        one = typer.Typer(add_completion=False, rich_markup_mode=self.rich_markup_mode)
        one.command(name)(found)
        return _one_line(typer.main.get_command(one))


def _one_line(command: TyperCommand) -> TyperCommand:
    """The command with its docstring's first paragraph as one line for the list of commands:
    the list keeps the docstring's own line breaks, which made its wrapping ragged."""
    first = (command.help or "").strip().split("\n\n")[0]
    command.short_help = " ".join(first.split()) or None
    return command
