"""Two people on Discord (Alice's DM, Bob on the web) and a server channel they share: private
memory stays private, the channel's memory is attributed and holds only what is true now, and
each person forgets only their own items there."""

from __future__ import annotations

import itertools

from bot.runtime import Runtime
from bot.turns.inbound import Actor, InboundMessage
from channels.drafts import CURSOR
from tests.discord.conftest import LaneFactory, eventually
from tests.discord.fake_discord import ALICE, BOB, BOT, CHANNEL_ID, DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.memory_people import (
    Lanes,
    in_a_group_each_person_forgets_only_their_own,
    private_memory_stays_private,
    the_group_sees_only_its_own_attributed_memory,
)

MENTION = f"<@{BOT['id']}>"
AUTHORS = {"Alice": ALICE, "Bob": BOB}
_web_ids = itertools.count(1)


def discord_lanes(runtime: Runtime, fake_discord: FakeDiscord, server: FakeOpenAI) -> Lanes:
    async def shown_after(channel: int, before: int) -> str:
        def delivered() -> bool:
            texts = fake_discord.texts_in(channel)
            return len(texts) > before and not texts[-1].endswith(CURSOR)

        await fake_discord.wait_until(delivered)
        return fake_discord.texts_in(channel)[-1].removeprefix("**Ada**\n")

    async def private(who: str, text: str) -> str:
        if who == "Bob":  # Bob talks to the bot on the web; the stand-in has Alice's DM only
            reply = await runtime.engine.respond(
                InboundMessage(
                    lane="web",
                    platform_message_id=f"web-{next(_web_ids)}",
                    chat_id="bob-visitor",
                    chat_kind="private",
                    actor=Actor(user_id="bob-visitor", display_name="Bob"),
                    text=text,
                )
            )
            return reply.text
        before = len(fake_discord.texts_in(DM_CHANNEL_ID))
        await fake_discord.post_message(DM_CHANNEL_ID, text)
        return await shown_after(DM_CHANNEL_ID, before)

    async def group_record(who: str, text: str) -> None:
        posted = await fake_discord.post_message(CHANNEL_ID, text, author=AUTHORS[who])
        # A recorded message makes no call the stand-in would see: the store is polled.
        await eventually(
            lambda: (
                runtime.stores.messages.find_platform_message("discord", str(CHANNEL_ID), posted["id"])
                is not None
            )
        )

    async def group_ask(who: str, text: str) -> str:
        before = len(fake_discord.texts_in(CHANNEL_ID))
        await fake_discord.post_message(CHANNEL_ID, f"{MENTION} {text}", author=AUTHORS[who], mentions=(BOT,))
        return await shown_after(CHANNEL_ID, before)

    return Lanes(runtime, server, private, group_record, group_ask)


async def test_private_memory_never_reaches_the_other_person_or_the_channel(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane()
    lanes = discord_lanes(runtime, fake_discord, fake_openai)
    await private_memory_stays_private(lanes)
    await the_group_sees_only_its_own_attributed_memory(lanes)
    await in_a_group_each_person_forgets_only_their_own(lanes)
