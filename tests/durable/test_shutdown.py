"""SIGTERM and SIGINT on a real `chorus serve`: running replies end cleanly, nothing is lost."""

from __future__ import annotations

import json
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.durable.serve_process import ServeProcess, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as ModelReply
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text

CURSOR = " ▌"
SLOW_REPLY = ModelReply(" ".join(f"word{n}" for n in range(400)), delay=0.25)
SHUTDOWN_NOTICE = "[Cut off: the server was restarting."


def assistant_rows(database: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(database) as connection:
        return connection.execute(
            "SELECT content, status, reply_to_id FROM messages WHERE role = 'assistant' ORDER BY id"
        ).fetchall()


async def start_web_turn(client: httpx.AsyncClient, base: str, text: str) -> httpx.Response:
    """Opens a streamed web turn and returns the open response."""
    state = (await client.post(f"{base}/api/session", json={})).json()
    # A new visitor each time: the bearer token alone says who is speaking.
    client.cookies.clear()
    request = client.build_request(
        "POST",
        f"{base}/api/sessions/{state['session_id']}/messages",
        headers={"Authorization": f"Bearer {state['token']}"},
        data={"text": text},
    )
    response = await client.send(request, stream=True)
    assert response.status_code == 200
    return response


async def read_events(lines: AsyncIterator[str], until_first_delta: bool) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    name = ""
    async for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append({"event": name, **json.loads(line.removeprefix("data: "))})
            if until_first_delta and name == "delta":
                return events
    return events


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_mid_reply_cuts_cleanly(tmp_path: Path, fake_openai: FakeOpenAI, signum: int) -> None:
    database = tmp_path / "chorus.db"
    async with FakeBotAPI() as bot_api:
        serve = ServeProcess(
            tmp_path,
            {
                "CHORUS_DATABASE_URL": f"sqlite:///{database}",
                "CHORUS_MODEL_BASE_URL": fake_openai.base_url,
                "CHORUS_TELEGRAM_TOKEN": TOKEN,
                "CHORUS_CHANNELS_TELEGRAM_API_BASE": bot_api.base_url,
                "CHORUS_SHUTDOWN_GRACE_SECONDS": "1",
            },
        )
        fake_openai.script(SLOW_REPLY, SLOW_REPLY)
        await serve.start()
        try:
            update = private_text(41, "tell me everything")
            bot_api.push(update)
            # A private chat streams into a native draft (sendMessageDraft).
            await wait_until(lambda: bot_api.drafts(41), what="a draft")
            async with httpx.AsyncClient(timeout=60) as client:
                response = await start_web_turn(client, serve.url, "and to me too")
                lines = response.aiter_lines()
                first = await read_events(lines, until_first_delta=True)
                serve.signal(signum)
                rest = await read_events(lines, until_first_delta=False)
                await response.aclose()
            code = await serve.wait()
        finally:
            serve.kill()

        assert code == 0, serve.log()
        stored = assistant_rows(database)
        assert [status for _, status, _ in stored] == ["interrupted", "interrupted"]
        assert all(content for content, _, _ in stored)
        contents = [content for content, _, _ in stored]
        # The Telegram reply is the stored text plus the notice; the draft is gone.
        [final] = bot_api.sent_texts(41)
        assert any(content.strip() in final for content in contents) and SHUTDOWN_NOTICE in final
        assert CURSOR not in final
        # The web stream ended with the same: what was stored, then the notice.
        done = [event for event in first + rest if event["event"] == "done"]
        assert len(done) == 1 and done[0]["status"] == "interrupted"
        web_text, _, web_notice = done[0]["text"].partition("\n\n")
        assert web_text in contents and web_notice.startswith(SHUTDOWN_NOTICE)
        # Telegram was told the update is handled: a restart is not sent it again.
        assert bot_api.confirmed_offset > update["update_id"]
        assert len(serve.log_lines("turn cut (shutdown)")) == 2
        assert "Traceback" not in serve.log()
