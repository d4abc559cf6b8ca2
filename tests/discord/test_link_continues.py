"""Linking the web widget and a Discord DM keeps the conversation the person was just having.

Both lanes run for real: discord.py against the gateway/REST stand-in, and the web lane's HTTP API.
"""

from __future__ import annotations

import re

import httpx

from bot.providers.openai import PURPOSE_HEADER
from bot.runtime import Runtime
from channels.web.app import create_app
from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, message_text
from tests.web.helpers import WebVisitor

# Generous: the machine running the suite may be loaded.
DEADLINE = 60.0
DISCORD_FIRST = "Remind me to water the plants on Friday."
WEB_FIRST = "My sister lives in Porto."
QUESTION = "What should I do on Friday?"


class Alice:
    """One person with a Discord account and a web visitor, not yet linked."""

    def __init__(self, runtime: Runtime, fake_discord: FakeDiscord, web: WebVisitor) -> None:
        self.runtime = runtime
        self.fake_discord = fake_discord
        self.web = web

    async def on_discord(self, text: str, reply: str | None = None) -> str:
        """Send a DM; wait for `reply`, or for one new message when the answer is not known."""
        before = len(self.fake_discord.sent_in(DM_CHANNEL_ID))
        await self.fake_discord.post_message(DM_CHANNEL_ID, text)

        def answered() -> bool:
            texts = self.fake_discord.texts_in(DM_CHANNEL_ID)
            return len(texts) > before and (reply is None or texts[-1] == reply)

        await self.fake_discord.wait_until(answered, timeout=DEADLINE)
        return self.fake_discord.texts_in(DM_CHANNEL_ID)[-1]

    async def on_web(self, text: str) -> str:
        final = (await self.web.say(text))[-1]
        await self.web.refresh()
        return str(final.data["text"])


async def alice_on(runtime: Runtime, fake_discord: FakeDiscord) -> tuple[Alice, httpx.AsyncClient]:
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(runtime)), base_url="http://chat.test"
    )
    return Alice(runtime, fake_discord, await WebVisitor.start(client, name="Alice")), client


def last_turn(server: FakeOpenAI) -> RecordedRequest:
    """The last turn request: after-turn work (memory, compaction) sends requests of its own."""
    return [request for request in server.requests if PURPOSE_HEADER.lower() not in request.headers][-1]


def code_in(shown: str) -> str:
    found = re.search(r"Your link code: `?(\w+)", shown)
    assert found is not None, shown
    return found.group(1)


async def test_the_newer_discord_conversation_continues_on_the_web_byte_identically(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    requests: list[RecordedRequest] = []
    for asked_on in ("discord", "web"):
        lane, runtime = await start_lane()
        alice, client = await alice_on(runtime, fake_discord)
        try:
            await alice.on_web(WEB_FIRST)
            old_web_session = alice.web.session_id
            await alice.on_discord(DISCORD_FIRST, reply=spoken(f"reply to: {DISCORD_FIRST}"))
            # The code is shown in the widget and entered in the Discord DM.
            linked = await alice.on_discord(f"/link {code_in(await alice.on_web('/link'))}")
            assert linked.startswith("Linked. Your private chats on discord, web now share one conversation.")
            assert old_web_session[:8] in linked
            await alice.web.refresh()
            assert alice.web.session_id != old_web_session
            if asked_on == "discord":
                await alice.on_discord(QUESTION, reply=spoken(f"reply to: {QUESTION}"))
            else:
                assert await alice.on_web(QUESTION) == f"reply to: {QUESTION}"
            requests.append(last_turn(fake_openai))
            # The web conversation was set aside, not lost: recall finds it from Discord.
            assert WEB_FIRST in await alice.on_discord("/recall sister Porto")
        finally:
            await client.aclose()
            await lane.stop()

    history = [message_text(m) for m in requests[0].messages if m["role"] != "system"]
    assert history == [DISCORD_FIRST, f"reply to: {DISCORD_FIRST}", QUESTION]
    assert requests[0].body == requests[1].body


async def test_the_newer_web_conversation_continues_in_the_discord_dm(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    requests: list[RecordedRequest] = []
    for asked_on in ("discord", "web"):
        lane, runtime = await start_lane()
        alice, client = await alice_on(runtime, fake_discord)
        try:
            await alice.on_discord(DISCORD_FIRST, reply=spoken(f"reply to: {DISCORD_FIRST}"))
            await alice.on_web(WEB_FIRST)
            web_session = alice.web.session_id
            # The code is shown in the Discord DM and entered in the widget.
            linked = await alice.on_web(f"/link {code_in(await alice.on_discord('/link'))}")
            assert linked.startswith("Linked.") and "It continues your most recent one" in linked
            assert alice.web.session_id == web_session
            question = "Where does my sister live?"
            if asked_on == "discord":
                await alice.on_discord(question, reply=spoken(f"reply to: {question}"))
            else:
                await alice.on_web(question)
            requests.append(last_turn(fake_openai))
            assert DISCORD_FIRST in await alice.on_web("/recall water plants Friday")
        finally:
            await client.aclose()
            await lane.stop()

    history = [message_text(m) for m in requests[0].messages if m["role"] != "system"]
    assert history == [WEB_FIRST, f"reply to: {WEB_FIRST}", "Where does my sister live?"]
    assert requests[0].body == requests[1].body
