"""kill -9 mid-reply, then a restart: every unanswered message is answered once, drafts finished."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from bot.providers.openai import PURPOSE_HEADER
from bot.recovery import UNANSWERED_NOTICE
from tests.durable.serve_process import ServeProcess, wait_until
from tests.durable.test_shutdown import read_events, start_web_turn
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.fakes.openai_server import Reply as ModelReply
from tests.support.peers import needs_postgres
from tests.telegram.bot_api_server import BOT_USERNAME, TOKEN, FakeBotAPI, group_chat, message, user

CURSOR = " ▌"
GROUP = -1001234
# A person's message as the model sees it (group messages carry the sender's name);
# memory work sends whole transcripts, several lines long.
QUESTION = re.compile(r"[^\n]*(tell me everything|and to me too|question \d+)")
SLOW_REPLY = ModelReply(" ".join(f"word{n}" for n in range(400)), delay=0.25)


def turn_requests(fake_openai: FakeOpenAI) -> int:
    """Model requests that answer a person (not memory or summary work): one question last."""
    return sum(
        1
        for request in fake_openai.requests
        if PURPOSE_HEADER.lower() not in request.headers
        and isinstance(request.json, dict)
        and QUESTION.fullmatch(last_user_text(request.json))
    )


def environment(database_url: str, fake_openai: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {"CHORUS_DATABASE_URL": database_url, "CHORUS_MODEL_BASE_URL": fake_openai.base_url, **extra}


def sqlite_rows(database: Path, query: str) -> list[Any]:
    with sqlite3.connect(database) as connection:
        return connection.execute(query).fetchall()


async def crash_mid_reply(serve: ServeProcess, bot_api: FakeBotAPI, fake_openai: FakeOpenAI) -> None:
    """Two turns streaming (Telegram and web), then kill -9."""
    fake_openai.script(SLOW_REPLY, SLOW_REPLY)
    await serve.start()
    # A group reply streams into an edited draft message (private chats use native drafts).
    bot_api.push(message(group_chat(GROUP), user(41), f"@{BOT_USERNAME} tell me everything"))
    await wait_until(lambda: any(CURSOR in text for text in bot_api.sent_texts(GROUP)), what="a draft")
    async with httpx.AsyncClient(timeout=60) as client:
        response = await start_web_turn(client, serve.url, "and to me too")
        lines = response.aiter_lines()
        await read_events(lines, until_first_delta=True)
        serve.kill()
        await response.aclose()


@pytest.mark.parametrize("mode", ["answer", "notice"])
async def test_a_restart_finishes_what_a_killed_process_left(
    tmp_path: Path, fake_openai: FakeOpenAI, mode: str
) -> None:
    database = tmp_path / "chorus.db"
    async with FakeBotAPI() as bot_api:
        settings = environment(
            f"sqlite:///{database}",
            fake_openai,
            CHORUS_TELEGRAM_TOKEN=TOKEN,
            CHORUS_CHANNELS_TELEGRAM_API_BASE=bot_api.base_url,
            CHORUS_RECOVERY_MODE=mode,
        )
        first = ServeProcess(tmp_path, settings, name="first")
        try:
            await crash_mid_reply(first, bot_api, fake_openai)
        finally:
            first.kill()
        assert sqlite_rows(database, "SELECT count(*) FROM messages WHERE role = 'assistant'") == [(0,)]
        [(stuck,)] = sqlite_rows(database, "SELECT draft_id FROM deliveries WHERE lane = 'telegram'")
        assert stuck is not None and CURSOR in bot_api.sent_texts(GROUP)[0]
        requests_before = turn_requests(fake_openai)

        second = ServeProcess(tmp_path, settings, name="second")
        try:
            await second.start()
            expected = "tell me everything" if mode == "answer" else UNANSWERED_NOTICE

            def finished() -> bool:
                texts = bot_api.sent_texts(GROUP)
                return len(texts) == 1 and expected in texts[0] and CURSOR not in texts[0]

            await wait_until(finished, what="the draft finished")
            await wait_until(
                lambda: all(
                    state != "open" for (state,) in sqlite_rows(database, "SELECT state FROM deliveries")
                ),
                what="both turns finished",
            )
            # Telegram re-sent the update (it was never confirmed); it is not answered again.
            await wait_until(lambda: bot_api.confirmed_offset > 0, what="the offset confirmed")
            await asyncio.sleep(0)
        finally:
            second.signal(15)
            assert await second.wait() == 0, second.log()

        states = sorted(state for (state,) in sqlite_rows(database, "SELECT state FROM deliveries"))
        replies = sqlite_rows(
            database,
            "SELECT m.content, d.lane FROM messages m JOIN deliveries d ON d.user_message_id = m.reply_to_id "
            "WHERE m.role = 'assistant'",
        )
        if mode == "answer":
            assert states == ["recovered", "recovered"]
            assert sorted(lane for _, lane in replies) == ["telegram", "web"]
            assert all(content.startswith("reply to:") for content, _ in replies)
            assert turn_requests(fake_openai) == requests_before + 2
        else:
            assert states == ["noticed", "noticed"]
            assert replies == [] and turn_requests(fake_openai) == requests_before
        # One message in the chat: the old draft, edited into its final state.
        assert len(bot_api.sent_texts(GROUP)) == 1
        assert len(second.log_lines("recovered message")) == 2


async def test_a_second_serve_on_one_sqlite_file_is_refused(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    settings = environment(f"sqlite:///{tmp_path / 'chorus.db'}", fake_openai)
    first = ServeProcess(tmp_path, settings, name="first")
    second = ServeProcess(tmp_path, settings, name="second")
    try:
        await first.start()
        with pytest.raises(AssertionError, match="exited at start"):
            await second.start()
        assert await second.wait() == 2
        assert "Another `chorus serve`" in second.log() and "use PostgreSQL" in second.log()
    finally:
        first.kill()


@needs_postgres
async def test_two_processes_starting_at_once_answer_each_message_once(
    tmp_path: Path, fake_openai: FakeOpenAI, postgres_url: str
) -> None:
    settings = environment(postgres_url, fake_openai)
    first = ServeProcess(tmp_path, settings, name="first")
    fake_openai.script(*[SLOW_REPLY] * 6)
    try:
        await first.start()
        async with httpx.AsyncClient(timeout=60) as client:
            turns = [await start_web_turn(client, first.url, f"question {n}") for n in range(6)]
            # Each stream stays open (a closed one is a visitor leaving: stored as interrupted).
            streams = [response.aiter_lines() for response in turns]
            for lines in streams:
                await read_events(lines, until_first_delta=True)
            first.kill()
            for response in turns:
                await response.aclose()
    finally:
        first.kill()
    requests_before = turn_requests(fake_openai)

    restarted = [ServeProcess(tmp_path, settings, name=f"restart{n}") for n in range(2)]
    database = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        await asyncio.gather(*(serve.start() for serve in restarted))

        def states() -> list[str]:
            with database.connect() as connection:
                return [row[0] for row in connection.execute(text("SELECT state FROM deliveries"))]

        await wait_until(
            lambda: states() and all(state == "recovered" for state in states()), what="recovery"
        )
    finally:
        for serve in restarted:
            serve.signal(15)
        codes = [await serve.wait() for serve in restarted]
    with database.connect() as connection:
        answers = connection.execute(
            text(
                "SELECT u.content, count(a.id) FROM messages u LEFT JOIN messages a "
                "ON a.reply_to_id = u.id AND a.role = 'assistant' WHERE u.role = 'user' GROUP BY u.content"
            )
        ).all()
    database.dispose()
    assert codes == [0, 0]
    assert sorted(answers) == [(f"question {n}", 1) for n in range(6)]
    assert turn_requests(fake_openai) == requests_before + 6
    recovered = [line for serve in restarted for line in serve.log_lines("recovered message")]
    assert len(recovered) == 6
