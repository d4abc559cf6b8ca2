"""Telegram messages → `InboundMessage`: who, where, what, and whether the bot was addressed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import Audio, Message, User, VideoNote, Voice
from aiohttp import ClientError

from bot.errors import AttachmentError
from bot.turns.inbound import (
    Actor,
    AttachmentKind,
    InboundAttachment,
    InboundMessage,
    ReplyTo,
    kind_of_file,
)

PRIVATE = "private"
GROUP_TYPES = frozenset({"group", "supergroup"})
# Message kinds Chorus cannot read yet, with how a reply names them.
UNSUPPORTED_KINDS = (
    ("sticker", "stickers"),
    ("location", "locations"),
    ("poll", "polls"),
    ("video", "videos"),
    ("contact", "contacts"),
)


def to_inbound(messages: Sequence[Message], bot: Bot, me: User) -> InboundMessage:
    """One inbound message from one Telegram message, or from every message of an album."""
    first = messages[0]
    sender = first.from_user
    if sender is None:
        raise ValueError("messages without a sender are filtered out before translation")
    return InboundMessage(
        lane="telegram",
        platform_message_id=str(first.message_id),
        chat_id=str(first.chat.id),
        chat_kind="private" if first.chat.type == PRIVATE else "group",
        actor=Actor(
            user_id=str(sender.id),
            display_name=sender.full_name,
            username=sender.username,
            is_bot=sender.is_bot,
        ),
        text="\n".join(text for message in messages if (text := message.text or message.caption)),
        thread_id=topic_of(first),
        was_mentioned=any(is_addressed(message, me) for message in messages),
        reply_to=_reply_to(first),
        attachments=tuple(item for message in messages for item in _attachments(message, bot)),
        received_at=first.date,
    )


def unsupported_kind(message: Message) -> str | None:
    """What a message Chorus cannot read is called ("stickers"), or None for a readable one."""
    for field, noun in UNSUPPORTED_KINDS:
        if getattr(message, field, None) is not None:
            return noun
    return None


def unsupported_reply(noun: str) -> str:
    return (
        f"I can't read {noun} yet. Send me text, a photo, a voice note or a document "
        "(PDF, TXT, Markdown, CSV, JSON)."
    )


def topic_of(message: Message) -> str | None:
    """The forum topic a message belongs to; each topic is a session of its own."""
    if message.is_topic_message and message.message_thread_id is not None:
        return str(message.message_thread_id)
    return None


def is_addressed(message: Message, me: User) -> bool:
    """Mentioned by @username or by a text mention, replied to, or sent a command."""
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == me.id:
        return True
    text = message.text or message.caption or ""
    for entity in message.entities or message.caption_entities or []:
        if entity.type == "text_mention" and entity.user is not None and entity.user.id == me.id:
            return True
        if entity.type == "mention" and _is_me(entity.extract_from(text)[1:], me):
            return True
        if entity.type == "bot_command" and entity.offset == 0:
            _, _, addressee = entity.extract_from(text).partition("@")
            if not addressee or _is_me(addressee, me):
                return True
    return False


def is_for_another_bot(message: Message, me: User) -> bool:
    """A command like /help@other_bot: never answered, even with activation `always`."""
    text = message.text or ""
    for entity in message.entities or []:
        if entity.type == "bot_command" and entity.offset == 0:
            _, _, addressee = entity.extract_from(text).partition("@")
            return bool(addressee) and not _is_me(addressee, me)
    return False


def bot_names(me: User) -> tuple[str, ...]:
    """What people call the bot out loud: its name and its username."""
    return tuple(name for name in (me.first_name, me.username) if name)


def _is_me(username: str, me: User) -> bool:
    return bool(me.username) and username.lower() == (me.username or "").lower()


def _reply_to(message: Message) -> ReplyTo | None:
    replied = message.reply_to_message
    # In a forum every message "replies" to its topic's opening service message.
    if replied is None or replied.forum_topic_created is not None:
        return None
    sender = replied.from_user
    return ReplyTo(
        message_id=str(replied.message_id),
        text=replied.text or replied.caption,
        sender_name=sender.full_name if sender is not None else None,
    )


def _attachments(message: Message, bot: Bot) -> list[InboundAttachment]:
    if message.photo:
        largest = max(message.photo, key=lambda size: size.width * size.height)
        return [
            InboundAttachment(
                kind="image",
                filename=f"photo_{largest.file_unique_id}.jpg",
                mime_type="image/jpeg",
                size=largest.file_size,
                fetch=_downloader(bot, largest.file_id, "the photo"),
            )
        ]
    document = message.document
    if document is not None:
        filename = document.file_name or f"document_{document.file_unique_id}"
        mime_type = document.mime_type or "application/octet-stream"
        return [
            InboundAttachment(
                kind=kind_of_file(mime_type),
                filename=filename,
                mime_type=mime_type,
                size=document.file_size,
                fetch=_downloader(bot, document.file_id, f"'{filename}'"),
            )
        ]
    return _recordings(message, bot)


def _recordings(message: Message, bot: Bot) -> list[InboundAttachment]:
    """A voice note, an audio file or a round video message, with the length Telegram states."""
    if message.voice is not None:
        voice = message.voice
        name = f"voice_{voice.file_unique_id}.ogg"
        return [_recording(bot, voice, "voice", name, voice.mime_type or "audio/ogg", "the voice note")]
    if message.video_note is not None:
        note = message.video_note
        name = f"video_note_{note.file_unique_id}.mp4"
        return [_recording(bot, note, "voice", name, "video/mp4", "the video message")]
    if message.audio is not None:
        audio = message.audio
        name = audio.file_name or f"audio_{audio.file_unique_id}.mp3"
        return [_recording(bot, audio, "audio", name, audio.mime_type or "audio/mpeg", f"'{name}'")]
    return []


def _recording(
    bot: Bot,
    media: Voice | VideoNote | Audio,
    kind: AttachmentKind,
    filename: str,
    mime_type: str,
    label: str,
) -> InboundAttachment:
    return InboundAttachment(
        kind=kind,
        filename=filename,
        mime_type=mime_type,
        size=media.file_size,
        fetch=_downloader(bot, media.file_id, label),
        duration_seconds=media.duration,
    )


def _downloader(bot: Bot, file_id: str, label: str) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        try:
            downloaded = await bot.download(file_id)
        except (TelegramAPIError, ClientError) as error:
            raise AttachmentError(
                f"I couldn't download {label} from Telegram ({error}). Please send it again."
            ) from error
        if downloaded is None:
            raise AttachmentError(f"Telegram sent nothing for {label}. Please send it again.")
        return downloaded.read()

    return fetch
