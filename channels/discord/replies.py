"""A turn's reply on Discord: typing, one draft edited as the text streams, then the parts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, aclosing, suppress

import discord

from bot.turns.events import Delta, TurnEvent
from channels.drafts import DraftStream

MESSAGE_LIMIT = 2000


async def deliver_reply(
    message: discord.Message,
    events: AsyncIterator[TurnEvent],
    *,
    edit_interval: float,
    on_draft: Callable[[discord.Message | discord.PartialMessage], Awaitable[None]] | None = None,
) -> None:
    """Answer `message` in its channel; the first part references it.

    Edits are throttled to one per `edit_interval` seconds; discord.py waits out any
    429 it still gets. The engine's stream is always read to the end, so the reply
    is stored even when Discord refuses a preview.
    """
    await deliver_to(
        message.channel,
        message.to_reference(fail_if_not_exists=False),
        events,
        edit_interval=edit_interval,
        on_draft=on_draft,
    )


async def deliver_to(
    channel: discord.abc.Messageable,
    reference: discord.MessageReference,
    events: AsyncIterator[TurnEvent],
    *,
    edit_interval: float,
    draft: discord.PartialMessage | None = None,
    on_draft: Callable[[discord.Message | discord.PartialMessage], Awaitable[None]] | None = None,
) -> None:
    """Deliver a turn into `channel` as a reply to `reference`, over `draft` if one is left."""
    sent: list[discord.Message | discord.PartialMessage] = [draft] if draft is not None else []
    async with AsyncExitStack() as typing:
        await typing.enter_async_context(channel.typing())

        async def send(text: str) -> discord.Message:
            # The first visible message replaces the typing indicator.
            await typing.aclose()
            if sent:
                posted = await channel.send(text)
            else:
                posted = await channel.send(text, reference=reference)
            sent.append(posted)
            return posted

        async def edit(shown: discord.Message | discord.PartialMessage, text: str) -> None:
            await shown.edit(content=text)

        drafts: DraftStream[discord.Message | discord.PartialMessage] = DraftStream(
            send=send, edit=edit, limit=MESSAGE_LIMIT, interval=edit_interval, draft=draft, on_draft=on_draft
        )
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
