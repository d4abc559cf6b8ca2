"""/pair: an admin lists the strangers waiting with a pairing code, and approves one (docs/access.md)."""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.turns.events import CommandAnswer


async def pair_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    if context.inbound.chat_kind != "private" or not await engine.db.run(
        engine.access.is_admin, context.inbound.lane, context.route.account.person_id
    ):
        return CommandAnswer("Only an admin can approve pairing codes, in a private chat with me.", ok=False)
    pairings = engine.stores.pairings
    if args:
        approved = await engine.db.run(pairings.approve, args)
        if approved is None:
            return CommandAnswer(
                f"No pairing code {args.strip()} is waiting (it may have expired).", ok=False
            )
        return CommandAnswer(
            f"Approved {approved.display_name or approved.platform_user_id} on {approved.lane}: "
            "their next message is answered."
        )
    waiting = await engine.db.run(pairings.pending)
    if not waiting:
        return CommandAnswer("No pairing codes are waiting.")
    lines = ["Waiting for approval (send /pair CODE):"]
    lines += [
        f"{pending.code} — {pending.display_name or '?'} ({pending.lane} {pending.platform_user_id})"
        for pending in waiting
    ]
    return CommandAnswer("\n".join(lines))


COMMANDS = (
    Command("pair", "admins: list pairing codes, or approve one: /pair CODE", pair_command, usage="[CODE]"),
)
