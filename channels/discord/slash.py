"""Slash commands: one application command per engine command, answered by the engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

# Runs the command text ("/persona sage") for the interaction that invoked it.
SlashRunner = Callable[[discord.Interaction, str], Awaitable[None]]

DESCRIPTION_LIMIT = 100


def add_engine_commands(
    tree: app_commands.CommandTree, commands: list[tuple[str, str]], run: SlashRunner
) -> None:
    for name, description in commands:
        tree.add_command(_slash_command(name, description, run))


def _slash_command(name: str, description: str, run: SlashRunner) -> app_commands.Command[Any, ..., None]:
    @app_commands.describe(args="what you would type after the command, e.g. a persona id")
    async def invoke(interaction: discord.Interaction, args: str | None = None) -> None:
        await run(interaction, f"/{name} {args}" if args else f"/{name}")

    return app_commands.Command(name=name, description=description[:DESCRIPTION_LIMIT], callback=invoke)
