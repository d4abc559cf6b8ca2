"""Identity commands: /link joins a person's accounts across apps, /unlink detaches one."""

from __future__ import annotations

from datetime import timedelta

from bot.commands.registry import Command, CommandContext
from bot.turns.events import CommandAnswer


async def link_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    identities, sessions = engine.stores.identities, engine.stores.sessions
    if context.inbound.chat_kind != "private":
        return CommandAnswer("Use /link in a private chat with me, not in a group.", ok=False)
    account = context.route.account
    if not args:
        ttl = engine.settings.limits.link_code_ttl_seconds
        code = await engine.db.run(identities.create_link_code, account.person_id, timedelta(seconds=ttl))
        return CommandAnswer(
            # Code spans: one tap copies the code on Telegram, and the command inside
            # is not a second tappable /link that would make a new code.
            f"Your link code: `{code.code}`\nOn another app, send me `/link {code.code}` within "
            f"{max(ttl // 60, 1)} minutes to continue this conversation there. It works once."
        )
    merge = await engine.db.run(
        identities.redeem_link_code,
        args,
        account,
        dedup_threshold=engine.settings.memory.dedup_threshold,
    )
    session = await engine.db.run(sessions.private_session, merge.person_id, engine.personas.default.id)
    lanes = sorted({linked.lane for linked in await engine.db.run(identities.accounts_of, merge.person_id)})
    lines = [f"Linked. Your private chats on {', '.join(lanes)} now share one conversation."]
    if merge.set_aside_session_id is not None:
        earlier = merge.set_aside_session_id[:8]
        lines.append(
            f"It continues your most recent one; the other ({earlier}) stays saved: "
            f"/recall searches it, `chorus export {earlier}` exports it."
        )
    return CommandAnswer("\n".join(lines), session_id=session.id)


async def unlink_command(context: CommandContext, _args: str) -> CommandAnswer:
    engine = context.engine
    identities, sessions = engine.stores.identities, engine.stores.sessions
    if context.inbound.chat_kind != "private":
        return CommandAnswer("Use /unlink in a private chat with me.", ok=False)
    person = await engine.db.run(identities.unlink, context.route.account)
    if person is None:
        return CommandAnswer("This account is not linked to any other.", ok=False)
    session = await engine.db.run(sessions.private_session, person.id, engine.personas.default.id)
    return CommandAnswer(
        "Unlinked. This account now has a conversation of its own; "
        "the shared one stays with your other accounts.",
        session_id=session.id,
    )


COMMANDS = (
    Command(
        "link",
        "link this account with another app: /link or /link CODE",
        link_command,
        usage="[CODE]",
    ),
    Command("unlink", "detach this account from linked ones", unlink_command),
)
