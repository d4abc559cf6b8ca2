"""kill -9 between scheduling and firing: the restarted `chorus serve` delivers the reminder, once."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.durable.serve_process import ServeProcess, wait_until
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text

CHAT = 701


def reminded(bot_api: FakeBotAPI) -> list[str]:
    """The reminder's messages in the chat (under the persona's name, on a line of its own)."""
    return [sent for sent in bot_api.sent_texts(CHAT) if sent.endswith("\n⏰ stretch")]


def rows(database: Path, query: str) -> list[Any]:
    with sqlite3.connect(database) as connection:
        return connection.execute(query).fetchall()


async def test_a_reminder_set_before_a_kill_is_delivered_once_after_the_restart(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    database = tmp_path / "chorus.db"
    async with FakeBotAPI() as bot_api:
        settings = {
            "CHORUS_DATABASE_URL": f"sqlite:///{database}",
            "CHORUS_MODEL_BASE_URL": fake_openai.base_url,
            "CHORUS_TELEGRAM_TOKEN": TOKEN,
            "CHORUS_CHANNELS_TELEGRAM_API_BASE": bot_api.base_url,
        }
        first = ServeProcess(tmp_path, settings, name="first")
        try:
            await first.start()
            bot_api.push(private_text(CHAT, "/remind 3s stretch"))
            await wait_until(
                lambda: any("I will remind you" in t for t in bot_api.sent_texts(CHAT)),
                what="the confirmation",
            )
        finally:
            first.kill()
        assert rows(database, "SELECT state FROM reminders") == [("scheduled",)]
        assert not reminded(bot_api)

        second = ServeProcess(tmp_path, settings, name="second")
        try:
            await second.start()
            await wait_until(lambda: reminded(bot_api), what="the reminder")
            await wait_until(
                lambda: rows(database, "SELECT state FROM reminders") == [("delivered",)], what="delivered"
            )
        finally:
            second.signal(15)
            assert await second.wait() == 0, second.log()
        assert len(reminded(bot_api)) == 1
        assert rows(database, "SELECT count(*) FROM messages WHERE kind = 'reminder'") == [(1,)]
