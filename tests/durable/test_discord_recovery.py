"""kill -9 of `chorus serve` mid-reply on Discord, then a restart: drafts finished, answered once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from bot.recovery import UNANSWERED_NOTICE
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, THREAD_ID, VALID_TOKEN, FakeDiscord
from tests.durable.serve_process import ServeProcess, wait_until
from tests.durable.test_recovery import SLOW_REPLY, sqlite_rows, turn_requests
from tests.fakes.openai_server import FakeOpenAI
from tests.support.peers import needs_postgres

CURSOR = " ▌"
# The persona a process without a config file speaks as.
PERSONA = "Assistant"
CHANNELS = (CHANNEL_ID, THREAD_ID, DM_CHANNEL_ID)


def environment(
    database_url: str, fake_openai: FakeOpenAI, discord: FakeDiscord, mode: str
) -> dict[str, str]:
    return {
        "CHORUS_DATABASE_URL": database_url,
        "CHORUS_MODEL_BASE_URL": fake_openai.base_url,
        "CHORUS_DISCORD_TOKEN": VALID_TOKEN,
        "CHORUS_CHANNELS_DISCORD_API_BASE": discord.api_base,
        "CHORUS_CHANNELS_DISCORD_GATEWAY_URL": discord.gateway_url,
        "CHORUS_RECOVERY_MODE": mode,
    }


async def connect(serve: ServeProcess, discord: FakeDiscord) -> None:
    discord.connected.clear()
    await serve.start()
    async with asyncio.timeout(180):
        await discord.connected.wait()


@pytest.mark.parametrize("mode", ["answer", "notice"])
async def test_a_restart_finishes_discord_drafts_a_killed_process_left(
    tmp_path: Path, fake_openai: FakeOpenAI, mode: str
) -> None:
    database = tmp_path / "chorus.db"
    async with FakeDiscord() as discord:
        settings = environment(f"sqlite:///{database}", fake_openai, discord, mode)
        first = ServeProcess(tmp_path, settings, name="first")
        fake_openai.script(SLOW_REPLY, SLOW_REPLY, SLOW_REPLY)
        try:
            await connect(first, discord)
            # In a server the persona streams through the channel's webhook (into a thread through
            # its parent's); in a DM the bot streams itself.
            await discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> tell me everything", mentions=(BOT,))
            await discord.post_message(
                THREAD_ID, f"<@{BOT['id']}> in the thread, tell me everything", mentions=(BOT,)
            )
            await discord.post_message(DM_CHANNEL_ID, "and to me too")
            await wait_until(
                lambda: all(
                    any(CURSOR in text for text in discord.texts_in(channel)) for channel in CHANNELS
                ),
                what="three drafts",
            )
            # Posting a draft and storing its id are two steps: crash once all are stored.
            await wait_until(
                lambda: sqlite_rows(database, "SELECT count(draft_id) FROM deliveries") == [(3,)],
                what="three drafts stored",
            )
        finally:
            first.kill()
        assert sqlite_rows(database, "SELECT count(*) FROM messages WHERE role = 'assistant'") == [(0,)]
        drafts = dict(
            sqlite_rows(database, "SELECT chat_id, draft_id FROM deliveries WHERE lane = 'discord'")
        )
        [persona_draft] = discord.sent_in(CHANNEL_ID)
        [thread_draft] = discord.sent_in(THREAD_ID)
        [bot_draft] = discord.sent_in(DM_CHANNEL_ID)
        assert persona_draft.webhook_id is not None and persona_draft.username == PERSONA
        assert thread_draft.webhook_id == persona_draft.webhook_id
        assert drafts == {
            str(CHANNEL_ID): f"{persona_draft.id}@webhook:{persona_draft.webhook_id}",
            str(THREAD_ID): f"{thread_draft.id}@webhook:{thread_draft.webhook_id}",
            str(DM_CHANNEL_ID): str(bot_draft.id),
        }
        requests_before = turn_requests(fake_openai)

        second = ServeProcess(tmp_path, settings, name="second")
        try:
            await connect(second, discord)

            def finished() -> bool:
                texts = [text for channel in CHANNELS for text in discord.texts_in(channel)]
                return len(texts) == 3 and all(CURSOR not in text for text in texts)

            await discord.wait_until(finished, timeout=180)
            await wait_until(
                lambda: all(
                    state != "open" for (state,) in sqlite_rows(database, "SELECT state FROM deliveries")
                ),
                what="every turn finished",
            )
        finally:
            second.signal(15)
            assert await second.wait() == 0, second.log()

        # Each draft was edited into its final state in place: no second message anywhere.
        assert [m.id for m in discord.sent_in(CHANNEL_ID)] == [persona_draft.id]
        assert [m.id for m in discord.sent_in(THREAD_ID)] == [thread_draft.id]
        assert [m.id for m in discord.sent_in(DM_CHANNEL_ID)] == [bot_draft.id]
        drafts_left = (persona_draft, thread_draft, bot_draft)
        assert not any(draft.components for draft in drafts_left)  # the Stop buttons are gone
        states = sorted(state for (state,) in sqlite_rows(database, "SELECT state FROM deliveries"))
        if mode == "answer":
            assert states == ["recovered"] * 3
            # A group names its speakers to the model; a DM reply names its persona in bold.
            assert persona_draft.text == "reply to: Alice: tell me everything"
            assert thread_draft.text == "reply to: Alice: in the thread, tell me everything"
            assert bot_draft.text == f"**{PERSONA}**\nreply to: and to me too"
            assert turn_requests(fake_openai) == requests_before + 3
        else:
            assert states == ["noticed"] * 3
            assert all(draft.text == UNANSWERED_NOTICE for draft in drafts_left)
            assert turn_requests(fake_openai) == requests_before
        assert len(second.log_lines("recovered message")) == 3


@needs_postgres
async def test_two_shard_processes_restarting_at_once_finish_a_left_draft_once(
    tmp_path: Path, fake_openai: FakeOpenAI, postgres_url: str
) -> None:
    async with FakeDiscord() as discord:
        settings = environment(postgres_url, fake_openai, discord, "answer")
        first = ServeProcess(tmp_path, settings, name="first")
        fake_openai.script(SLOW_REPLY)
        database = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))

        def rows(query: str) -> list[Any]:
            with database.connect() as connection:
                return list(connection.execute(text(query)).all())

        try:
            try:
                await connect(first, discord)
                await discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> tell me everything", mentions=(BOT,))
                await wait_until(lambda: rows("SELECT draft_id FROM deliveries WHERE draft_id IS NOT NULL"))
            finally:
                first.kill()
            [draft] = discord.sent_in(CHANNEL_ID)
            requests_before = turn_requests(fake_openai)

            # The bot, now split into two shards, one per process; both look for left turns at start.
            restarted = [
                ServeProcess(
                    tmp_path,
                    {
                        **settings,
                        "CHORUS_CHANNELS_DISCORD_SHARD_COUNT": "2",
                        "CHORUS_CHANNELS_DISCORD_SHARD_IDS": f"[{shard}]",
                    },
                    name=f"shard{shard}",
                )
                for shard in (0, 1)
            ]
            try:
                await asyncio.gather(*(serve.start() for serve in restarted))
                await wait_until(lambda: rows("SELECT state FROM deliveries") == [("recovered",)])
                await discord.wait_until(lambda: CURSOR not in draft.text, timeout=180)
            finally:
                for serve in restarted:
                    serve.signal(15)
                codes = [await serve.wait() for serve in restarted]
            assert codes == [0, 0]
            assert [m.id for m in discord.sent_in(CHANNEL_ID)] == [draft.id]
            assert draft.text == "reply to: Alice: tell me everything"
            assert turn_requests(fake_openai) == requests_before + 1
            assert len([line for serve in restarted for line in serve.log_lines("recovered message")]) == 1
            assert len(rows("SELECT id FROM messages WHERE role = 'assistant'")) == 1
        finally:
            database.dispose()
