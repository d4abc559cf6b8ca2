"""Discord messages and interactions → the engine's `InboundMessage`."""

from __future__ import annotations

import mimetypes
import re

import discord

from bot.turns.inbound import (
    Actor,
    AttachmentKind,
    InboundAttachment,
    InboundMessage,
    ReplyTo,
    kind_of_file,
)

USER_MENTION = re.compile(r"<@!?(\d+)>")
ROLE_MENTION = re.compile(r"<@&(\d+)>")


def message_inbound(
    message: discord.Message, me: discord.abc.User, application_id: int | None = None
) -> InboundMessage:
    """A DM is the person's private chat; a guild channel or thread is a group chat.

    A thread is a channel of its own on Discord, so its id alone keeps its session apart.
    """
    return InboundMessage(
        lane="discord",
        platform_message_id=str(message.id),
        chat_id=str(message.channel.id),
        chat_kind="private" if message.guild is None else "group",
        actor=actor(message.author),
        text=readable_text(message, me),
        was_mentioned=is_addressed(message, me, application_id),
        reply_to=reply_to(message),
        attachments=tuple(inbound_attachment(item) for item in message.attachments),
    )


def interaction_inbound(interaction: discord.Interaction, text: str) -> InboundMessage:
    """A slash command, as the same text a person would type."""
    return InboundMessage(
        lane="discord",
        platform_message_id=f"interaction-{interaction.id}",
        chat_id=str(interaction.channel_id),
        chat_kind="private" if interaction.guild_id is None else "group",
        actor=actor(interaction.user),
        text=text,
        was_mentioned=True,
    )


def actor(user: discord.abc.User) -> Actor:
    return Actor(user_id=str(user.id), display_name=user.display_name, username=user.name, is_bot=user.bot)


def is_addressed(message: discord.Message, me: discord.abc.User, application_id: int | None = None) -> bool:
    """Mentioned by name or through its managed role, or a reply to one of the bot's messages.

    Discord's autocomplete often offers the bot's managed role (`<@&role>`) rather than
    the bot; a persona's message posted through the bot's webhook (an application-owned
    webhook, so the message names the application) is the bot's too.
    """
    if any(user.id == me.id for user in message.mentions):
        return True
    if any(is_own_role(role, me) for role in message.role_mentions):
        return True
    resolved = message.reference.resolved if message.reference is not None else None
    if not isinstance(resolved, discord.Message):
        return False
    if resolved.author.id == me.id:
        return True
    return (
        resolved.webhook_id is not None
        and application_id is not None
        and resolved.application_id == application_id
    )


def is_own_role(role: discord.Role, me: discord.abc.User) -> bool:
    """The role Discord created for this bot when it joined the server."""
    return role.tags is not None and role.tags.bot_id == me.id


def readable_text(message: discord.Message, me: discord.abc.User) -> str:
    """The text without the bot's own mention (or its role's); other mentions become @names."""
    names = {user.id: user.display_name for user in message.mentions}
    roles = {role.id: role for role in message.role_mentions}

    def replace_user(match: re.Match[str]) -> str:
        user_id = int(match.group(1))
        if user_id == me.id:
            return ""
        return f"@{names[user_id]}" if user_id in names else match.group(0)

    def replace_role(match: re.Match[str]) -> str:
        role = roles.get(int(match.group(1)))
        if role is None:
            return match.group(0)
        return "" if is_own_role(role, me) else f"@{role.name}"

    text = USER_MENTION.sub(replace_user, message.content)
    return ROLE_MENTION.sub(replace_role, text).strip()


def reply_to(message: discord.Message) -> ReplyTo | None:
    reference = message.reference
    if reference is None or reference.message_id is None:
        return None
    resolved = reference.resolved
    if isinstance(resolved, discord.Message):
        return ReplyTo(
            message_id=str(resolved.id),
            text=resolved.content or None,
            sender_name=resolved.author.display_name,
        )
    return ReplyTo(message_id=str(reference.message_id))


def inbound_attachment(attachment: discord.Attachment) -> InboundAttachment:
    declared = attachment.content_type or mimetypes.guess_type(attachment.filename)[0]
    # Discord sends parameters ("text/plain; charset=utf-8"); storage wants the bare type.
    mime_type = (declared or "application/octet-stream").split(";")[0].strip()
    return InboundAttachment(
        kind=attachment_kind(attachment, mime_type),
        filename=attachment.filename,
        mime_type=mime_type,
        size=attachment.size,
        fetch=attachment.read,
        # Discord states the length of a voice message only; an audio file's is measured.
        duration_seconds=attachment.duration,
    )


def attachment_kind(attachment: discord.Attachment, mime_type: str) -> AttachmentKind:
    """A voice message (recorded in the app, with its waveform), an audio file, an image or a document."""
    if attachment.is_voice_message():
        return "voice"
    return kind_of_file(mime_type)
