"""Reminders on Telegram: set with /remind in a chat, sent there by aiogram when they fall due."""

from __future__ import annotations

from sqlalchemy import text

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.telegram.bot_api_server import FakeBotAPI, group_chat, message, private_text, user
from tests.telegram.conftest import LaneFactory

BLOCKED = {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}


def states(runtime: Runtime) -> list[tuple[str, str | None, str | None]]:
    with runtime.database.connect() as connection:
        rows = connection.execute(
            text("SELECT state, platform_message_id, failure FROM reminders ORDER BY id")
        ).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


async def test_a_reminder_is_sent_to_the_chat_it_was_set_in(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    bot_api.push(private_text(601, "/remind 1s stretch"))
    await bot_api.wait_for(lambda: any("I will remind you" in t for t in bot_api.sent_texts(601)))

    # Under the persona's name, as its replies are: one bot account speaks for every persona.
    await bot_api.wait_for(lambda: "Ada\n⏰ stretch" in bot_api.sent_texts(601))

    await bot_api.wait_for(lambda: states(runtime) and states(runtime)[0][0] == "delivered")
    [(state, message_id, failure)] = states(runtime)
    sent = [m for m in bot_api.messages(601) if m.shown.text == "Ada\n⏰ stretch"]
    assert len(sent) == 1 and message_id == str(sent[0].message_id) and failure is None


async def test_a_blocked_bot_marks_the_reminder_failed_with_telegrams_reason(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    bot_api.push(private_text(602, "/remind 2s stretch"))
    await bot_api.wait_for(lambda: any("I will remind you" in t for t in bot_api.sent_texts(602)))
    bot_api.fail_next("sendMessage", BLOCKED)

    await bot_api.wait_for(lambda: states(runtime) and states(runtime)[0][0] == "failed")

    assert states(runtime) == [("failed", None, "Forbidden: bot was blocked by the user")]
    assert not any("⏰ stretch" in sent for sent in bot_api.sent_texts(602))


async def test_a_reminder_set_in_a_forum_topic_goes_back_to_that_topic(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    await start_lane(activation="always")
    forum, group = group_chat(-100888, forum=True), -100888
    bob = user(611, "Bob")
    bot_api.push(message(forum, bob, "/remind 1s standup", message_thread_id=9, is_topic_message=True))

    await bot_api.wait_for(lambda: "Ada\n⏰ standup" in bot_api.sent_texts(group))

    [sent] = [c for c in bot_api.calls_to("sendMessage") if "⏰ standup" in c.params["text"]]
    assert sent.params["message_thread_id"] == "9"
