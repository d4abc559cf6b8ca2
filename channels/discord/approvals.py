"""A tool call waiting for a yes or no, as a Discord message with Run and Deny buttons.

Like the Stop button, the view is finished before it is sent: a click is handled by its
custom id in `on_interaction` (`answer`), so a button left from before a restart still
decides. The click passes to `Approvals.decide` as `discord:<user id>`; once decided, the
message says who decided and its buttons go; a second click is told it changed nothing.
"""

from __future__ import annotations

import discord

from bot.turns.approvals import Approvals
from bot.turns.events import ToolStep

LANE = "discord"
# A button's custom id: this prefix, the approval's id, and "yes" or "no".
APPROVAL_PREFIX = "chorus-approval:"


def approval_view(approval_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for label, answer, style in (
        ("Run", "yes", discord.ButtonStyle.success),
        ("Deny", "no", discord.ButtonStyle.danger),
    ):
        view.add_item(
            discord.ui.Button(label=label, style=style, custom_id=f"{APPROVAL_PREFIX}{approval_id}:{answer}")
        )
    view.stop()
    return view


async def ask(channel: discord.abc.Messageable, step: ToolStep) -> None:
    """Show the call and its question, with the buttons that answer it."""
    if step.approval_id is not None:
        await channel.send(step.progress_line, view=approval_view(step.approval_id))


def is_approval(custom_id: str) -> bool:
    return custom_id.startswith(APPROVAL_PREFIX)


async def answer(approvals: Approvals, interaction: discord.Interaction, custom_id: str) -> None:
    """A click of Run or Deny: decided once; the message shows who decided, or the clicker why not."""
    approval_id, _, choice = custom_id.removeprefix(APPROVAL_PREFIX).partition(":")
    if not approval_id.isdigit():
        await interaction.response.send_message("This button is not one Chorus knows.", ephemeral=True)
        return
    decided = await approvals.decide(int(approval_id), choice == "yes", f"{LANE}:{interaction.user.id}")
    message = interaction.message
    if not decided.ok or message is None:
        await interaction.response.send_message(decided.text, ephemeral=True)
        return
    who = interaction.user.display_name
    await interaction.response.edit_message(content=f"{message.content}\n{decided.text} ({who})", view=None)
