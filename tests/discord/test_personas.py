"""Personas people can see: webhooks in server channels and threads, a bold header elsewhere."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import (
    BOT,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILDS,
    MANAGE_WEBHOOKS,
    THREAD_ID,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI

MENTION = f"<@{BOT['id']}>"
SAGE_AVATAR = "https://example.org/avatars/sage.png"
WEBHOOK_ROLE_ID = 1100000000000000090
PERSONAS = [
    {"id": "ada", "name": "Ada", "prompt": "You are Ada.", "greeting": "Hello, I'm Ada."},
    {"id": "sage", "name": "Sage", "prompt": "You are Sage.", "avatar_url": SAGE_AVATAR},
]


async def test_each_persona_posts_under_its_own_name_and_avatar_through_one_reused_webhook(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane(personas=PERSONAS)
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} hello", mentions=(BOT,))
    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: hello"])
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} /persona sage", mentions=(BOT,))
    await fake_discord.wait_until(lambda: len(fake_discord.sent_in(CHANNEL_ID)) == 2)
    await fake_discord.post_message(THREAD_ID, f"{MENTION} in the thread", mentions=(BOT,))
    await fake_discord.wait_for_texts(THREAD_ID, ["reply to: Alice: in the thread"])
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} and now?", mentions=(BOT,))
    await fake_discord.wait_until(lambda: len(fake_discord.sent_in(CHANNEL_ID)) == 3)
    await fake_discord.wait_until(
        lambda: fake_discord.sent_in(CHANNEL_ID)[2].text == "reply to: Alice: and now?"
    )

    hello, switched, later = fake_discord.sent_in(CHANNEL_ID)
    (in_thread,) = fake_discord.sent_in(THREAD_ID)
    assert (hello.username, hello.avatar_url) == ("Ada", None)
    # The command's answer is the bot's own message, not a persona's.
    assert switched.webhook_id is None and switched.text.startswith("Switched to Sage (sage).")
    assert (later.username, later.avatar_url) == ("Sage", SAGE_AVATAR)
    # The thread's own persona is still Ada; it posts through its parent channel's webhook.
    assert (in_thread.username, in_thread.webhook_id) == ("Ada", hello.webhook_id)
    assert len(fake_discord.webhooks) == 1 and fake_discord.webhooks[0].channel_id == CHANNEL_ID
    assert len(fake_discord.calls_to("POST", f"/channels/{CHANNEL_ID}/webhooks")) == 1
    # The model's history never contains the display name: it stays tagged by `name`.
    last_request = fake_openai.requests[-1].messages
    assistant = [m for m in last_request if m["role"] == "assistant"]
    assert assistant and all("**" not in str(m["content"]) for m in assistant)


async def test_a_webhook_from_an_earlier_run_is_reused(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    lane, _ = await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} first", mentions=(BOT,))
    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: first"])
    await lane.stop()

    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} second", mentions=(BOT,))
    await fake_discord.wait_until(lambda: "reply to: Alice: second" in fake_discord.texts_in(CHANNEL_ID))

    assert len(fake_discord.webhooks) == 1
    assert {m.webhook_id for m in fake_discord.sent_in(CHANNEL_ID)} == {fake_discord.webhooks[0].id}


async def test_without_manage_webhooks_replies_carry_a_bold_name_and_the_operator_is_told_once(
    start_lane: LaneFactory, fake_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    fake_discord.manage_webhooks = False
    await start_lane()
    caplog.set_level(logging.WARNING, logger="channels.discord.webhooks")
    first = await fake_discord.post_message(CHANNEL_ID, f"{MENTION} one", mentions=(BOT,))
    await fake_discord.wait_for_texts(CHANNEL_ID, [spoken("reply to: Alice: one")])
    await fake_discord.post_message(THREAD_ID, f"{MENTION} two", mentions=(BOT,))
    await fake_discord.wait_for_texts(THREAD_ID, [spoken("reply to: Alice: two")])

    (reply,) = fake_discord.sent_in(CHANNEL_ID)
    assert reply.webhook_id is None and reply.reference_id == int(first["id"])
    # Listing the channel's webhooks already needs the permission; asked once, refused once.
    assert [c.status for c in fake_discord.calls if c.path.endswith("/webhooks")] == [403]
    warnings = [r.getMessage() for r in caplog.records if "Manage Webhooks" in r.getMessage()]
    assert len(warnings) == 1


ADMIN_CHANGES: dict[str, Callable[[FakeDiscord], Awaitable[None]]] = {
    "the bot's role is granted Manage Webhooks": lambda discord: (
        discord.grant_manage_webhooks_to_the_bot_role(GUILDS[0])
    ),
    "the channel allows it for the bot's role": lambda fake: fake.allow_manage_webhooks_in_channel(
        GUILDS[0], CHANNEL_ID
    ),
    "the bot is given a role with it": lambda fake: fake.give_the_bot_role(GUILDS[0], WEBHOOK_ROLE_ID),
}


@pytest.mark.parametrize("change", list(ADMIN_CHANGES))
async def test_a_channel_that_refused_a_webhook_is_asked_again_when_an_admin_grants_it(
    start_lane: LaneFactory, fake_discord: FakeDiscord, change: str
) -> None:
    fake_discord.manage_webhooks = False
    await start_lane()
    # A role that has the permission, not the bot's yet.
    await fake_discord.create_role(GUILDS[0], WEBHOOK_ROLE_ID, "Webhooks", MANAGE_WEBHOOKS)
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} one", mentions=(BOT,))
    await fake_discord.wait_for_texts(CHANNEL_ID, [spoken("reply to: Alice: one")])

    await ADMIN_CHANGES[change](fake_discord)
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} two", mentions=(BOT,))

    # The persona speaks under its own name now, not after the ten-minute wait.
    await fake_discord.wait_for_texts(CHANNEL_ID, [spoken("reply to: Alice: one"), "reply to: Alice: two"])
    bold, persona = fake_discord.sent_in(CHANNEL_ID)
    assert (bold.webhook_id, persona.username) == (None, "Ada")
    assert persona.webhook_id == fake_discord.webhooks[0].id
    assert [c.status for c in fake_discord.calls if c.path.endswith("/webhooks")] == [403, 200, 200]


async def test_a_dm_names_the_persona_in_bold_without_webhooks(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane(personas=PERSONAS)
    await fake_discord.post_message(DM_CHANNEL_ID, "/persona sage")
    await fake_discord.wait_until(lambda: len(fake_discord.sent_in(DM_CHANNEL_ID)) == 1)
    await fake_discord.post_message(DM_CHANNEL_ID, "hi")

    await fake_discord.wait_until(
        lambda: fake_discord.texts_in(DM_CHANNEL_ID)[1:] == [spoken("reply to: hi", "Sage")]
    )
    assert fake_discord.webhooks == [] and not fake_discord.calls_to("GET", "/webhooks")
