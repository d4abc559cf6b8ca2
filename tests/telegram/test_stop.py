"""/stop in a Telegram chat ends the reply being written; the next message is answered as usual."""

from __future__ import annotations

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.telegram.bot_api_server import FakeBotAPI, private_text

DEADLINE = 60.0


async def test_stop_ends_the_streaming_reply_and_shows_it_stopped(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Once upon a time"))
    bot_api.push(private_text(601, "tell me a long story"))
    await bot_api.wait_for(lambda: any(t.startswith("Once") for t in bot_api.sent_texts(601)), DEADLINE)

    bot_api.push(private_text(601, "/stop"))

    await bot_api.wait_for(lambda: "Stopped." in bot_api.sent_texts(601), DEADLINE)
    await bot_api.wait_for(lambda: bot_api.sent_texts(601)[0] == "Once upon a time\n\n[Stopped.]", DEADLINE)
    [(session, _)] = runtime.store.list_sessions()
    rows = runtime.store.messages(session.id)
    assert [(m.role, m.status) for m in rows if m.role == "assistant"] == [("assistant", "interrupted")]

    bot_api.push(private_text(601, "a short one then"))
    await bot_api.wait_for(lambda: "reply to: a short one then" in bot_api.sent_texts(601), DEADLINE)
    assert runtime.engine.stop_turn(session.id) is False


async def test_stop_when_nothing_runs(lane: TelegramLane, bot_api: FakeBotAPI) -> None:
    bot_api.push(private_text(602, "/stop"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(602) == ["Nothing to stop."], DEADLINE)
