"""Many tool rounds through every lane's real client at a tiny CHORUS_CONTEXT_COUNT.

`test_tool_invariants.py` runs this module in a process whose environment sets
CHORUS_CONTEXT_COUNT=3 (the limit is read once, at import); in any other run it is skipped.
Every request the model server receives is checked: no `tool` message without its call,
no call without its results, each call back with the `extra_content` it came with (the
first call of a round is signed, as Gemini 3 signs it), the window starts at a person's
message and holds the turn's question, and the web, Telegram and Discord lanes send the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.providers.openai import PURPOSE_HEADER
from bot.runtime import Runtime
from bot.tools.registry import StaticTools
from channels.discord.lane import DiscordLane
from channels.drafts import CURSOR
from channels.telegram.lane import TelegramLane
from channels.web.app import create_app
from tests.discord.conftest import lane_settings
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Scripted, ToolCalls, echo_reply
from tests.support.postgres import fresh_database
from tests.support.runtime import make_runtime
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text
from tests.tools.test_turn_rounds import assert_whole_pairs, echo_tool
from tests.web.helpers import WebVisitor
from transcript.limits import CONTEXT_COUNT

pytestmark = pytest.mark.skipif(CONTEXT_COUNT != 3, reason="run with CHORUS_CONTEXT_COUNT=3")

QUESTIONS = [f"question {number}: shout a{number}, b{number} and c{number}" for number in range(4)]


def tool_rounds(body: dict[str, Any]) -> str | Scripted:
    """Each turn: two parallel calls (interleaved fragments), then one more call, then the answer."""
    messages = body["messages"]
    if "tools" not in body:
        return echo_reply(body)
    last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    rounds = sum(1 for message in messages[last_user:] if message.get("tool_calls"))
    number = messages[last_user]["content"].split(":")[0].split()[-1]
    if rounds == 0:
        calls = [("echo", {"word": f"a{number}"}), ("echo", {"word": f"b{number}"})]
        return ToolCalls(calls, text="Let me see. ", piece_chars=3, extra_content=(signed(f"a{number}"),))
    if rounds == 1:
        return ToolCalls(
            [("echo", {"word": f"c{number}"})], piece_chars=4, extra_content=(signed(f"c{number}"),)
        )
    return f"A{number}, B{number} and C{number}."


def signed(word: str) -> dict[str, Any]:
    """The `extra_content` the first call of a round comes with."""
    return {"google": {"thought_signature": f"signature of {word}"}}


def assert_signed(messages: list[dict[str, Any]]) -> None:
    """The first call of each round is back with its `extra_content`, the others without any."""
    for message in messages:
        for position, call in enumerate(message.get("tool_calls") or []):
            word = json.loads(call["function"]["arguments"])["word"]
            assert call.get("extra_content") == (signed(word) if position == 0 else None), call


def turn_bodies(server: FakeOpenAI, since: int) -> list[bytes]:
    return [
        request.body
        for request in server.requests[since:]
        if PURPOSE_HEADER.lower() not in request.headers and "tools" in (request.json or {})
    ]


def check_window(body: bytes) -> None:
    messages = json.loads(body)["messages"]
    assert_whole_pairs(messages)
    assert_signed(messages)
    said = [message for message in messages if message["role"] != "system"]
    assert said[0]["role"] == "user", said[0]
    question = max(i for i, message in enumerate(messages) if message["role"] == "user")
    assert messages[question]["content"].startswith("question ")


async def through_web(runtime: Runtime) -> None:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(runtime)), base_url="http://chat.test"
    ) as client:
        visitor = await WebVisitor.start(client, "Alice")
        for question in QUESTIONS:
            events = await visitor.say(question)
            assert events[-1].name == "done", events[-1]
            # After-turn work (summaries, memory) finishes first, so every lane sees the same rows.
            await runtime.engine.drain()


async def through_telegram(runtime: Runtime, bot_api: FakeBotAPI) -> None:
    lane = TelegramLane(runtime, edit_interval=0.2, group_edit_interval=0.5, album_delay=0.2)
    await lane.start()
    try:
        for count, question in enumerate(QUESTIONS, 1):
            bot_api.push(private_text(901, question))

            def answered(count: int = count) -> bool:
                texts = bot_api.sent_texts(901)
                return len(texts) == count and not texts[-1].endswith(CURSOR)

            await bot_api.wait_for(answered)
            await runtime.engine.drain()
    finally:
        await lane.stop()


async def through_discord(runtime: Runtime, fake_discord: FakeDiscord) -> None:
    lane = DiscordLane(runtime, edit_interval=0.05, retry_first=0.05)
    await lane.start()
    await fake_discord.connected.wait()
    try:
        for count, question in enumerate(QUESTIONS, 1):
            await fake_discord.post_message(DM_CHANNEL_ID, question)
            await fake_discord.wait_until(
                lambda count=count: (  # type: ignore[misc]
                    len(texts := fake_discord.texts_in(DM_CHANNEL_ID)) == count
                    and not texts[-1].endswith(CURSOR)
                )
            )
            await runtime.engine.drain()
    finally:
        await lane.stop()


async def drive_every_lane(
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    bot_api: FakeBotAPI,
    fake_discord: FakeDiscord,
    databases: dict[str, dict[str, str]],
    bodies: dict[str, list[bytes]],
) -> None:
    """The questions through each lane's real client, each lane on its own database; the
    model requests of each lane's turns go to `bodies`."""
    lanes: dict[str, Callable[[Runtime], Awaitable[None]]] = {
        "web": through_web,
        "telegram": lambda runtime: through_telegram(runtime, bot_api),
        "discord": lambda runtime: through_discord(runtime, fake_discord),
    }
    for name, drive in lanes.items():
        runtime = make_runtime(
            tmp_path / name,
            model_base_url=fake_openai.base_url,
            channels_telegram_token=TOKEN,
            channels_telegram_api_base=bot_api.base_url,
            **lane_settings(fake_discord),
            **databases[name],
        )
        runtime.tools.add_source(StaticTools([echo_tool([])]))
        since = len(fake_openai.requests)
        try:
            await drive(runtime)
        finally:
            await runtime.aclose()
        bodies[name] = turn_bodies(fake_openai, since)


@contextmanager
def lane_databases(kind: str, lanes: list[str]) -> Iterator[dict[str, dict[str, str]]]:
    """Each lane's database settings: its own SQLite file, or its own fresh PostgreSQL database."""
    if kind == "sqlite":
        yield {lane: {} for lane in lanes}
        return
    with ExitStack() as stack:
        yield {lane: {"database_url": stack.enter_context(fresh_database())} for lane in lanes}


@pytest.mark.parametrize("database_kind", ["sqlite", "postgresql"])
async def test_every_request_keeps_tool_rows_whole_and_every_lane_sends_the_same_bytes(
    tmp_path: Path, fake_openai: FakeOpenAI, database_kind: str
) -> None:
    fake_openai.default = tool_rounds
    bodies: dict[str, list[bytes]] = {}
    with lane_databases(database_kind, ["web", "telegram", "discord"]) as databases:
        async with FakeBotAPI() as bot_api, FakeDiscord() as fake_discord:
            await drive_every_lane(tmp_path, fake_openai, bot_api, fake_discord, databases, bodies)

    # Three model calls per turn, each on a window of at most three units plus the question's turn.
    assert len(bodies["web"]) == 3 * len(QUESTIONS)
    for body in bodies["web"]:
        check_window(body)
    last = json.loads(bodies["web"][-1])["messages"]
    # The window is small: the first questions are long out of it, the last turn's rounds all in.
    said = [message for message in last if message["role"] != "system"]
    previous = f"question {len(QUESTIONS) - 2}"
    assert not any(previous in str(message.get("content")) for message in said)
    assert [m["role"] for m in said] == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert bodies["telegram"] == bodies["web"]
    assert bodies["discord"] == bodies["web"]
