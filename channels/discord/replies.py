"""A turn's reply on Discord: typing, one draft edited as the text streams, then the parts."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, aclosing, suppress

import discord

from bot.turns.events import Delta, TurnEvent
from channels.drafts import DraftStream

MESSAGE_LIMIT = 2000


async def deliver_reply(
    message: discord.Message, events: AsyncGenerator[TurnEvent, None], *, edit_interval: float
) -> None:
    """Answer `message` in its channel; the first part references it.

    Edits are throttled to one per `edit_interval` seconds; discord.py waits out any
    429 it still gets. The engine's stream is always read to the end, so the reply
    is stored even when Discord refuses a preview.
    """
    channel = message.channel
    sent: list[discord.Message] = []
    async with AsyncExitStack() as typing:
        await typing.enter_async_context(channel.typing())

        async def send(text: str) -> discord.Message:
            # The first visible message replaces the typing indicator.
            await typing.aclose()
            if sent:
                posted = await channel.send(text)
            else:
                posted = await channel.send(text, reference=message.to_reference(fail_if_not_exists=False))
            sent.append(posted)
            return posted

        async def edit(draft: discord.Message, text: str) -> None:
            await draft.edit(content=text)

        drafts = DraftStream(send=send, edit=edit, limit=MESSAGE_LIMIT, interval=edit_interval)
        streamed = ""
        # aclosing: if Discord fails for good, the engine stores the partial reply at once.
        async with aclosing(events) as turn:
            async for event in turn:
                if isinstance(event, Delta):
                    streamed += event.text
                    with suppress(discord.HTTPException):
                        await drafts.update(streamed)
                elif event.should_send:
                    await drafts.finish(event.text)
