"""Spoken replies on Discord: each part of a reply as an audio attachment (OGG/Opus).

Discord plays an attached OGG file inline. A bot may upload 10 MB per file wherever it
writes (more only in boosted servers); each part holds at most what the speech service
reads at once, cut at sentence ends. When the speech service fails, the person gets one
short line saying so instead (the written reply is already there).
"""

from __future__ import annotations

import io
import logging

import discord

from bot.errors import SpeechError
from bot.speech.speaking import Speaking, SpeechTarget
from channels.discord.replies import DiscordReply

log = logging.getLogger(__name__)

AUDIO_ATTACHMENTS = SpeechTarget(audio_format="ogg_opus", max_chars=4096, max_bytes=10 * 1024 * 1024)


async def send_spoken_reply(reply: DiscordReply, speaking: Speaking, text: str) -> None:
    """`text` spoken as audio attachments after the written reply."""
    for index, part_text in enumerate(speaking.parts_of(text, AUDIO_ATTACHMENTS)):
        try:
            part = await speaking.speak_part(part_text, index, AUDIO_ATTACHMENTS)
        except SpeechError as error:
            await reply.send_after(text=f"(I couldn't speak this reply: {error})")
            return
        try:
            await reply.send_after(file=discord.File(io.BytesIO(part.audio), filename=part.filename))
        except discord.HTTPException as error:
            log.warning("Discord refused a spoken reply: %s", error)
            return
