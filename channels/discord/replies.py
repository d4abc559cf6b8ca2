"""A turn's reply on Discord: typing, one draft edited as the text streams, then the parts.

Assistant replies in server channels and threads are posted through the channel's webhook
under the persona's name and avatar; in DMs, and in servers where no webhook can be had,
they start with the persona's name in bold. While the reply streams, its draft carries a
Stop button; the final text replaces it without the button.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, aclosing, suppress
from typing import Any

import discord
from discord.utils import MISSING, escape_markdown

from bot.turns.events import Reply, ToolStep, TurnEvent
from channels.discord.approvals import ask
from channels.discord.webhooks import PersonaWebhooks
from channels.drafts import DraftGone, DraftStreamer, EditedDraft, play
from channels.text import split_message
from persona import Persona, PersonaRegistry

MESSAGE_LIMIT = 2000
UNKNOWN_MESSAGE = 10008
UNKNOWN_WEBHOOK = 10015
# A Stop button's custom id: this prefix and the session whose turn it stops.
STOP_PREFIX = "chorus-stop:"
# How a turn's delivery state names a draft a webhook posted: "<message id>@webhook:<webhook id>".
WEBHOOK_DRAFT = "@webhook:"


def _never_ready(text: str) -> bool:
    return False


def draft_ref(message: discord.Message) -> str:
    """The stored name of a draft: its id, and the webhook it must be edited through, if any."""
    if message.webhook_id is None:
        return str(message.id)
    return f"{message.id}{WEBHOOK_DRAFT}{message.webhook_id}"


def parse_draft_ref(ref: str) -> tuple[int, int | None]:
    """(message id, webhook id or None) of a stored draft name."""
    message_id, _, webhook_id = ref.partition(WEBHOOK_DRAFT)
    return int(message_id), int(webhook_id) if webhook_id else None


def stop_view(session_id: str) -> discord.ui.View:
    """A Stop button for the turn running in `session_id`.

    The view is finished before it is sent, so discord.py keeps no per-message state for
    it: clicks are handled by custom id in `on_interaction`, which also works for a button
    left over from before a restart.
    """
    view = discord.ui.View(timeout=None)
    view.add_item(
        discord.ui.Button(
            label="Stop", emoji="⏹️", style=discord.ButtonStyle.secondary, custom_id=STOP_PREFIX + session_id
        )
    )
    view.stop()
    return view


# The thinking shown above a reply: one line, so splitting at the message limit never cuts it.
REASONING_CHARS = 900


def spoiler_reasoning(reasoning: str) -> str:
    """The model's thinking as one spoiler line ("💭 ||…||"), its end kept when it is long."""
    line = " ".join(reasoning.split()).replace("||", "|\u200b|")
    if len(line) > REASONING_CHARS:
        line = "…" + line[-(REASONING_CHARS - 1) :]
    return f"💭 ||{line}||"


class DiscordReply:
    """Plays one turn's events back in the channel of the message it answers.

    `reference` is that message in a server (replies the bot posts point at it; None in
    DMs). `draft`: a draft message an earlier process left (a recovered turn), continued
    and edited into this reply. `on_draft` learns each streaming draft as it is posted,
    so a restart can finish it.
    """

    def __init__(
        self,
        channel: discord.abc.Messageable,
        reference: discord.MessageReference | None,
        *,
        personas: PersonaRegistry,
        webhooks: PersonaWebhooks,
        edit_interval: float,
        draft: discord.Message | None = None,
        on_draft: Callable[[str], Awaitable[None]] | None = None,
        in_guild: bool | None = None,
    ) -> None:
        self._channel = channel
        self._reference = reference
        # A server channel speaks through the persona's webhook; known from the reference,
        # unless a message the bot starts (a reminder) says so without one.
        self._in_guild = reference is not None if in_guild is None else in_guild
        self._on_draft = on_draft
        self._personas = personas
        self._webhooks = webhooks
        self._persona: Persona | None = None
        self._session_id: str | None = None
        # Resolved when the first assistant text arrives; None: post as the bot itself.
        self._webhook: discord.Webhook | None = None
        self._sent: list[discord.Message] = [draft] if draft is not None else []
        # The turn's final reply, once it has arrived.
        self.reply: Reply | None = None
        self._typing = AsyncExitStack()
        self._draft: EditedDraft[str, discord.Message] = EditedDraft(
            send=self._send, edit=self._edit, handle=draft
        )
        # A reply that ends within the first interval is sent once, without edits. discord.py
        # waits out rate limits itself; a refused preview only costs that preview.
        self.drafts: DraftStreamer[str] = DraftStreamer(
            self._draft,
            render=self._preview,
            interval=edit_interval,
            first_wait=edit_interval,
            ready=_never_ready,
            failures=(discord.HTTPException,),
        )

    @property
    def first_message_id(self) -> str | None:
        return str(self._sent[0].id) if self._sent else None

    async def play(self, events: AsyncGenerator[TurnEvent, None]) -> None:
        """The engine's stream is always read to the end, so the reply is stored even when
        Discord refuses a preview."""
        async with self._typing:
            await self._typing.enter_async_context(self._channel.typing())
            try:
                # aclosing: if Discord fails for good, the engine stores the partial reply at once.
                async with aclosing(events) as turn:
                    self.reply = await play(
                        turn, self.drafts, ask=self._ask, before=self._before, on_reply=self._on_reply
                    )
            finally:
                await self.drafts.close()

    async def _ask(self, step: ToolStep) -> None:
        await ask(self._channel, step)

    async def _before(self, event: TurnEvent) -> None:
        await self._speaker(event.persona_id, event.session_id)

    async def _on_reply(self, reply: Reply) -> None:
        self.reply = reply
        if reply.should_send:
            await self._finish(reply)

    async def _finish(self, reply: Reply) -> None:
        await self.drafts.close()
        if reply.kind == "assistant":
            await self._speaker(reply.persona_id, reply.session_id)
        text = reply.text
        if reply.reasoning:
            # /reasoning on: the thinking rides above the answer, hidden behind a spoiler.
            text = f"{spoiler_reasoning(reply.reasoning)}\n\n{text}"
        await self._draft.finish(split_message(self._framed(text), MESSAGE_LIMIT))

    def _preview(self, text: str, speaker: str | None, cursor: str) -> str:
        text = self._framed(text)
        room = MESSAGE_LIMIT - len(cursor)
        if len(text) > room:
            text = text[: room - 1] + "…"
        return text + cursor

    async def _speaker(self, persona_id: str | None, session_id: str | None) -> None:
        if self._persona is not None or persona_id is None:
            return
        self._persona = self._personas.resolve(persona_id)
        self._session_id = session_id
        if self._in_guild:
            self._webhook = await self._webhooks.for_channel(self._channel)

    def _framed(self, text: str) -> str:
        """Without a webhook, an assistant reply names its persona in a bold first line."""
        if self._persona is None or self._webhook is not None:
            return text
        return f"**{escape_markdown(self._persona.name)}**\n{text}"

    def _view(self, *, first: bool) -> Any:
        # The Stop button rides on the streaming draft only.
        if self._draft.finishing or not first or self._session_id is None:
            return MISSING
        return stop_view(self._session_id)

    async def _send(self, text: str) -> discord.Message:
        # The first visible message replaces the typing indicator.
        await self._typing.aclose()
        view = self._view(first=not self._sent)
        posted: discord.Message | None = None
        if self._webhook is not None and self._persona is not None:
            posted = await self._send_as_persona(self._webhook, self._persona, text, view)
        if posted is None:
            posted = await self._send_as_bot(text, view)
        self._sent.append(posted)
        if self._on_draft is not None and not self._draft.finishing:
            await self._on_draft(draft_ref(posted))
        return posted

    async def send_after(self, *, text: str | None = None, file: discord.File | None = None) -> None:
        """A message after the reply (a spoken reply's audio), from whoever sent the reply."""
        content = text if text is not None else MISSING
        attached = file if file is not None else MISSING
        if self._webhook is not None and self._persona is not None:
            thread = self._channel if isinstance(self._channel, discord.Thread) else MISSING
            with suppress(discord.NotFound):
                await self._webhook.send(
                    content,
                    file=attached,
                    username=self._persona.name,
                    avatar_url=self._persona.avatar_url or MISSING,
                    thread=thread,
                    wait=True,
                )
                return
            # The webhook is gone: the bot sends it itself.
            if file is not None:
                file.reset()
        if self._reference is None:
            await self._channel.send(content, file=attached)
        else:
            await self._channel.send(content, file=attached, reference=self._reference)

    async def _send_as_bot(self, text: str, view: Any) -> discord.Message:
        if self._reference is None:
            # A DM answers in place, without quoting.
            return await self._channel.send(text, view=view)
        # In a busy server channel the reply points at its question.
        return await self._channel.send(text, reference=self._reference, view=view)

    async def _send_as_persona(
        self, webhook: discord.Webhook, persona: Persona, text: str, view: Any
    ) -> discord.Message | None:
        try:
            return await webhook.send(
                text,
                username=persona.name,
                avatar_url=persona.avatar_url or MISSING,
                thread=self._channel if isinstance(self._channel, discord.Thread) else MISSING,
                view=view,
                wait=True,
            )
        except discord.NotFound as error:
            if error.code != UNKNOWN_WEBHOOK:
                raise
            # Deleted by an admin: this reply goes out as the bot, the next one gets a new webhook.
            self._webhooks.forget(webhook)
            self._webhook = None
            return None

    async def _edit(self, draft: discord.Message, text: str, final: bool) -> None:
        view = None if final else MISSING
        try:
            # A webhook message edits itself through its webhook (and its thread).
            await draft.edit(content=text, view=view)
        except discord.NotFound as error:
            if error.code == UNKNOWN_MESSAGE:
                raise DraftGone from error
            raise


async def deliver_reply(
    message: discord.Message,
    events: AsyncGenerator[TurnEvent, None],
    *,
    personas: PersonaRegistry,
    webhooks: PersonaWebhooks,
    edit_interval: float,
    on_draft: Callable[[str], Awaitable[None]] | None = None,
) -> DiscordReply:
    """Answer `message` in its channel; the `DiscordReply` holds the final reply."""
    reference = message.to_reference(fail_if_not_exists=False) if message.guild is not None else None
    reply = DiscordReply(
        message.channel,
        reference,
        personas=personas,
        webhooks=webhooks,
        edit_interval=edit_interval,
        on_draft=on_draft,
    )
    await reply.play(events)
    return reply
