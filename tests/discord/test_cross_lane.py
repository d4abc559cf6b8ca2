"""One person on the web and on Discord: one conversation, the same model request."""

from __future__ import annotations

import itertools

from bot.runtime import Runtime
from bot.turns.inbound import Actor, InboundMessage
from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

_web_ids = itertools.count(1)
FIRST = "I am planning a trip to Lisbon in May."
FOLLOW_UP = "Which city did I mention?"


def web_message(visitor_id: str, text: str) -> InboundMessage:
    """What the web lane hands the engine for a visitor's message."""
    return InboundMessage(
        lane="web",
        platform_message_id=f"web-{next(_web_ids)}",
        chat_id=visitor_id,
        chat_kind="private",
        actor=Actor(user_id=visitor_id, display_name="Alice"),
        text=text,
    )


async def link_web_and_discord(runtime: Runtime, fake_discord: FakeDiscord) -> str:
    """Alice asks for a code on the web and enters it in her Discord DM; returns her visitor id."""
    visitor_id, _ = runtime.stores.visitors.create_visitor()
    shown = await runtime.engine.respond(web_message(visitor_id, "/link"))
    code = shown.text.split("\n")[0].removeprefix("Your link code: ").strip("`")
    before = len(fake_discord.sent)
    await fake_discord.post_message(DM_CHANNEL_ID, f"/link {code}")
    await fake_discord.wait_until(lambda: len(fake_discord.sent) == before + 1)
    assert (
        fake_discord.sent[-1].text == "Linked. Your private chats on discord, web now share one conversation."
    )
    return visitor_id


async def test_a_linked_person_continues_one_conversation_across_web_and_discord(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    # The same history twice, on two fresh runtimes: the follow-up arrives once from
    # Discord and once from the web.
    lane, runtime = await start_lane()
    visitor_id = await link_web_and_discord(runtime, fake_discord)
    await runtime.engine.respond(web_message(visitor_id, FIRST))
    await fake_discord.post_message(DM_CHANNEL_ID, FOLLOW_UP)
    await fake_discord.wait_until(lambda: fake_discord.sent[-1].text == spoken(f"reply to: {FOLLOW_UP}"))
    from_discord = fake_openai.requests[-1]
    await lane.stop()

    _, runtime = await start_lane()
    visitor_id = await link_web_and_discord(runtime, fake_discord)
    await runtime.engine.respond(web_message(visitor_id, FIRST))
    await runtime.engine.respond(web_message(visitor_id, FOLLOW_UP))
    from_web = fake_openai.requests[-1]

    assert [(m["role"], m["content"]) for m in from_discord.messages[1:]] == [
        ("user", FIRST),
        ("assistant", f"reply to: {FIRST}"),
        ("user", FOLLOW_UP),
    ]
    assert from_discord.body == from_web.body
