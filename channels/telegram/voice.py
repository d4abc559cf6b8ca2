"""Spoken replies on Telegram: each part of a reply as a voice note (OGG/Opus, sendVoice).

Telegram shows an OGG/Opus file sent with sendVoice as a voice note with its waveform; bots
may upload up to 50 MB. Each part holds at most one message's worth of text (4096 characters),
cut at sentence ends. The person sees "recording voice…" while a part is made; when the speech
service fails, they get one short line saying so instead (the written reply is already there).
"""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import BufferedInputFile, ReplyParameters
from aiogram.utils.chat_action import ChatActionSender
from aiohttp import ClientError

from bot.errors import SpeechError
from bot.speech.speaking import Speaking, SpeechTarget
from channels.telegram.replies import GroupBudget, ReplyTarget, send_text

log = logging.getLogger(__name__)

VOICE_NOTES = SpeechTarget(audio_format="ogg_opus", max_chars=4096, max_bytes=50 * 1024 * 1024)


async def send_spoken_reply(
    bot: Bot, target: ReplyTarget, speaking: Speaking, text: str, budget: GroupBudget
) -> None:
    """`text` spoken as voice notes after the written reply."""
    for index, part_text in enumerate(speaking.parts_of(text, VOICE_NOTES)):
        try:
            async with ChatActionSender.record_voice(
                bot=bot, chat_id=target.chat_id, message_thread_id=target.thread_id
            ):
                part = await speaking.speak_part(part_text, index, VOICE_NOTES)
        except SpeechError as error:
            await send_text(bot, target, f"(I couldn't speak this reply: {error})", budget)
            return
        if target.is_group:
            budget.spend(target.chat_id)
        try:
            await bot.send_voice(
                chat_id=target.chat_id,
                message_thread_id=target.thread_id,
                voice=BufferedInputFile(part.audio, part.filename),
                duration=max(1, round(part.seconds)),
                reply_parameters=(
                    ReplyParameters(message_id=target.reply_to_message_id, allow_sending_without_reply=True)
                    if target.reply_to_message_id is not None and index == 0
                    else None
                ),
            )
        except (TelegramAPIError, ClientError) as error:
            log.warning("Telegram refused a spoken reply in chat %s: %s", target.chat_id, error)
            return
