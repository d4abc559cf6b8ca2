"""MCP tools in real turns: a web visitor over a real uvicorn server, a real model server
scripting the calls, and real MCP servers (mcp-server-time over stdio, the SDK's over HTTP)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from bot.runtime import Runtime
from channels.discord.lane import DiscordLane
from channels.telegram.lane import TelegramLane
from channels.web.app import create_app
from tests.discord.fake_discord import DM_CHANNEL_ID, VALID_TOKEN, FakeDiscord
from tests.durable.serve_process import wait_until
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.live_server import LiveServer
from tests.support.runtime import RuntimeFactory
from tests.support.teardown import within_deadline
from tests.telegram.bot_api_server import (
    BOT_USERNAME,
    TOKEN,
    FakeBotAPI,
    group_chat,
    message,
    private_text,
    user,
)
from tests.tools.mcp_server import PIXEL
from tests.tools.mcp_support import READY_SECONDS, HttpMcpServer, serve, stdio_test_server, time_server
from tests.web.conftest import Event
from tests.web.helpers import WebVisitor

# Tests of what MCP servers do, not of who may make them act: a member's call of a tool that
# writes runs without asking (by default it asks, docs/access.md).
MEMBERS_RUN_ALL = {"tools_approve": {"*": {"members": "allow"}}}


async def started_runtime(
    runtimes: RuntimeFactory,
    tmp_path: Path,
    model: FakeOpenAI,
    lane_settings: dict[str, Any] | None = None,
    **servers: Any,
) -> Runtime:
    """A runtime whose MCP servers (`tools.mcp_servers`, given as its environment variable)
    are connected, as `chorus serve` connects them in the background."""
    runtime = runtimes(
        tmp_path,
        **(lane_settings or {}),
        model_base_url=model.base_url,
        tools_mcp_servers=servers,
        # Under load a restart takes seconds; the call waits for it within this bound.
        tools_timeout_seconds=READY_SECONDS,
    )
    runtime.mcp_servers.start()
    await runtime.mcp_servers.settled()
    assert [status.state for status in runtime.mcp_servers.health()] == ["ready"] * len(servers)
    return runtime


@asynccontextmanager
async def web_visitor(runtime: Runtime) -> AsyncIterator[WebVisitor]:
    """A visitor of the web lane served by uvicorn on 127.0.0.1, over real HTTP."""
    async with (
        LiveServer(create_app(runtime)) as live,
        httpx.AsyncClient(base_url=live.base_url, timeout=READY_SECONDS) as client,
    ):
        yield await WebVisitor.start(client)


def time_of_tokyo(model: FakeOpenAI) -> dict[str, Any]:
    """The server's own answer to the call, as the model was sent it back: the current
    time in Tokyo, nine hours ahead of UTC."""
    result: dict[str, Any] = json.loads(last_result_sent(model))
    assert result["timezone"] == "Asia/Tokyo"
    assert datetime.fromisoformat(result["datetime"]).utcoffset() == timedelta(hours=9)
    return result


def tool_steps(events: list[Event]) -> list[tuple[str, str]]:
    return [(event.data["name"], event.data["status"]) for event in events if event.name == "tool"]


def answer(events: list[Event]) -> dict[str, Any]:
    final = events[-1]
    assert final.name == "done", events
    return final.data


def chat_requests(model: FakeOpenAI) -> list[dict[str, Any]]:
    """The bodies of the turns' requests (not those of summaries)."""
    return [request.json for request in model.requests if not request.is_summary]


def offered_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def last_result_sent(model: FakeOpenAI) -> str:
    """The content of the last tool result the model was sent back."""
    results = [message for message in chat_requests(model)[-1]["messages"] if message["role"] == "tool"]
    content: str = results[-1]["content"]
    return content


async def test_a_web_visitor_asks_the_time_and_mcp_server_time_answers_through_the_model(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(
        ToolCalls([("time__get_current_time", {"timezone": "Asia/Tokyo"})]), "It is evening in Tokyo."
    )
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, time=time_server())

    async with web_visitor(runtime) as visitor:
        events = await visitor.say("What time is it in Tokyo?")

    assert tool_steps(events) == [("time__get_current_time", "started"), ("time__get_current_time", "done")]
    assert (answer(events)["text"], answer(events)["status"]) == ("It is evening in Tokyo.", "complete")
    offered = {tool["function"]["name"]: tool["function"] for tool in chat_requests(fake_openai)[0]["tools"]}
    assert "timezone" in offered["time__get_current_time"]["parameters"]["properties"]
    # The built-in tools are offered beside the server's, from the one registry.
    assert "recall" in offered
    result = time_of_tokyo(fake_openai)
    rows = runtime.stores.messages.messages(visitor.session_id)
    assert [(row.kind, row.status) for row in rows] == [
        ("message", "complete"),
        ("tool_call", "complete"),
        ("tool_result", "complete"),
        ("message", "complete"),
    ]
    assert json.loads(rows[2].content) == result


@asynccontextmanager
async def telegram_lane(
    runtimes: RuntimeFactory, tmp_path: Path, model: FakeOpenAI, **servers: Any
) -> AsyncIterator[tuple[FakeBotAPI, Runtime]]:
    """A Telegram lane (aiogram, long polling) on the Bot API stand-in, its servers connected."""
    async with FakeBotAPI() as bot_api:
        telegram = {"channels_telegram_token": TOKEN, "channels_telegram_api_base": bot_api.base_url}
        runtime = await started_runtime(runtimes, tmp_path, model, telegram, **servers)
        lane = TelegramLane(runtime)
        await lane.start()
        try:
            yield bot_api, runtime
        finally:
            await within_deadline(lane.stop(), "stopping the Telegram lane")


async def test_a_telegram_user_asks_the_time_through_aiogram_and_the_bot_api_stand_in(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(
        ToolCalls([("time__get_current_time", {"timezone": "Asia/Tokyo"})]), "It is evening in Tokyo."
    )
    async with telegram_lane(runtimes, tmp_path, fake_openai, time=time_server()) as (bot_api, _):
        bot_api.push(private_text(501, "What time is it in Tokyo?"))
        answered = ["Ada\nIt is evening in Tokyo."]
        await bot_api.wait_for(lambda: bot_api.sent_texts(501)[-1:] == answered, timeout=READY_SECONDS)
    time_of_tokyo(fake_openai)


async def test_a_telegram_group_is_offered_only_the_server_tools_its_rules_let_into_groups(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    servers = {
        "time": time_server(),
        "test": stdio_test_server(),
        "trusted": stdio_test_server(in_groups=True),
    }
    async with telegram_lane(runtimes, tmp_path, fake_openai, **servers) as (bot_api, _):
        bot_api.push(private_text(501, "What can you do?"))
        await bot_api.wait_for(lambda: bot_api.sent_texts(501), timeout=READY_SECONDS)
        bot_api.push(message(group_chat(-100), user(502, "Bob"), f"@{BOT_USERNAME} what can you do?"))
        await bot_api.wait_for(lambda: bot_api.sent_texts(-100), timeout=READY_SECONDS)

    private, group = [set(offered_names(body)) for body in chat_requests(fake_openai)]
    assert {"time__get_current_time", "test__echo", "trusted__echo"} <= private
    # Read-only by the server's hint, or let in by `in_groups: true`; test__echo is neither.
    assert {"time__get_current_time", "trusted__echo"} <= group
    assert "test__echo" not in group


async def test_a_discord_user_asks_the_time_through_discord_py_and_the_discord_stand_in(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(
        ToolCalls([("time__get_current_time", {"timezone": "Asia/Tokyo"})]), "It is evening in Tokyo."
    )
    async with FakeDiscord() as discord:
        lane_settings = {
            "discord_token": VALID_TOKEN,
            "channels_discord_api_base": discord.api_base,
            "channels_discord_gateway_url": discord.gateway_url,
        }
        runtime = await started_runtime(runtimes, tmp_path, fake_openai, lane_settings, time=time_server())
        lane = DiscordLane(runtime)
        await lane.start()
        try:
            async with asyncio.timeout(READY_SECONDS):
                await discord.connected.wait()
            await discord.post_message(DM_CHANNEL_ID, "What time is it in Tokyo?")
            await discord.wait_for_texts(DM_CHANNEL_ID, ["**Ada**\nIt is evening in Tokyo."], READY_SECONDS)
        finally:
            await within_deadline(lane.stop(), "stopping the Discord lane")
    time_of_tokyo(fake_openai)


async def test_a_tool_a_server_adds_during_a_turn_is_offered_in_the_next_one(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path
) -> None:
    fake_openai.script(
        ToolCalls([("test__add_tool", {"name": "late_arrival"})]),
        "Added.",
        ToolCalls([("test__late_arrival", {})]),
        "It ran.",
    )
    runtime = await started_runtime(
        runtimes, tmp_path, fake_openai, MEMBERS_RUN_ALL, test=stdio_test_server()
    )

    async with web_visitor(runtime) as visitor:
        await visitor.say("Add a tool.")
        await wait_until(
            lambda: "test__late_arrival" in [tool.name for tool in runtime.tools.all()],
            what="the list_changed notification",
        )
        events = await visitor.say("Call it.")

    first, _, second, _ = [offered_names(body) for body in chat_requests(fake_openai)]
    assert "test__late_arrival" not in first and "test__late_arrival" in second
    assert tool_steps(events) == [("test__late_arrival", "started"), ("test__late_arrival", "done")]
    assert last_result_sent(fake_openai) == "late_arrival ran"
    assert runtime.mcp_servers.health()[0].restarts == 0


@pytest.mark.parametrize("vision", [True, False])
async def test_an_image_a_tool_returns_is_shown_to_a_vision_model_or_named_to_another(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path, vision: bool
) -> None:
    fake_openai.script(ToolCalls([("test__picture", {})]), "A red pixel.")
    runtime = await started_runtime(
        runtimes, tmp_path, fake_openai, {"model_vision": vision, **MEMBERS_RUN_ALL}, test=stdio_test_server()
    )

    async with web_visitor(runtime) as visitor:
        events = await visitor.say("Show me the picture.")

    assert answer(events)["text"] == "A red pixel."
    messages = fake_openai.requests[-1].json["messages"]
    result = next(message for message in messages if message["role"] == "tool")
    images = [part for message in messages if isinstance(message["content"], list)
              for part in message["content"] if part["type"] == "image_url"]  # fmt: skip
    if vision:
        # The result's text, then its image in the user message the API allows images in.
        assert result["content"] == "a red pixel"
        assert messages[messages.index(result) + 1]["role"] == "user"
        (image,) = images
        header, data = image["image_url"]["url"].split(",", 1)
        assert header.startswith("data:image/")
        assert Image.open(io.BytesIO(base64.b64decode(data))).size == Image.open(io.BytesIO(PIXEL)).size
    else:
        assert result["content"].startswith("a red pixel\n\n[image: ")
        assert images == []
    rows = runtime.stores.messages.messages(visitor.session_id)
    assert [row.attachment_count for row in rows if row.kind == "tool_result"] == [1]


async def test_an_mcp_server_killed_mid_conversation_fails_one_call_and_serves_again_after_its_restart(
    fake_openai: FakeOpenAI, runtimes, tmp_path: Path, http_servers: list[HttpMcpServer]
) -> None:
    server = await serve(http_servers, tmp_path)
    fake_openai.script(
        ToolCalls([("web__process_id", {})]),
        "Noted.",
        ToolCalls([("web__echo", {"text": "still there?"})]),
        "That tool is down; I answer without it.",
        ToolCalls([("web__echo", {"text": "back again"})]),
        "It is back.",
    )
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, MEMBERS_RUN_ALL, web={"url": server.url})

    async with web_visitor(runtime) as visitor:
        first = await visitor.say("Which process serves you?")
        assert tool_steps(first)[-1] == ("web__process_id", "done")
        # The answer came from the server process about to be killed.
        assert server.process is not None and int(last_result_sent(fake_openai)) == server.process.pid

        server.kill()
        down = await visitor.say("Are you still there?")
        # The turn goes on: the model reads an error result saying the server is gone, and answers.
        assert tool_steps(down) == [("web__echo", "started"), ("web__echo", "error")]
        assert (answer(down)["text"], answer(down)["status"]) == (
            "That tool is down; I answer without it.",
            "complete",
        )
        assert re.match(
            r"Error: The MCP server web (stopped answering|is down) .*restart", last_result_sent(fake_openai)
        ), last_result_sent(fake_openai)
        assert runtime.mcp_servers.health()[0].state == "down"

        await server.start()
        connection = runtime.mcp_servers.connections[0]
        # Restarted in the background after the backoff (again, while the server was still away).
        await wait_until(lambda: connection.state == "ready", what="the restart in the background")
        back = await visitor.say("And now?")
        assert tool_steps(back) == [("web__echo", "started"), ("web__echo", "done")]
        assert last_result_sent(fake_openai) == "back again"
        assert answer(back)["text"] == "It is back."

    status = runtime.mcp_servers.health()[0]
    assert status.state == "ready" and status.restarts >= 1
    rows = runtime.stores.messages.messages(visitor.session_id)
    # Three whole turns stored, the call the dead server could not run among them as a failed result.
    assert [(row.kind, row.status) for row in rows] == [
        pair
        for result in ("complete", "failed", "complete")
        for pair in (
            ("message", "complete"),
            ("tool_call", "complete"),
            ("tool_result", result),
            ("message", "complete"),
        )
    ]
